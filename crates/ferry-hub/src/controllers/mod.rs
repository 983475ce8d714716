//! Built-in controllers.
