//! REST handlers.
