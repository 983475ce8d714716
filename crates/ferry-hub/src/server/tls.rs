//! CA and serving certificate generation and the rustls server config.
