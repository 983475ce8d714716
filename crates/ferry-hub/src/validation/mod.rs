//! Validation of names and of custom resources against their CRD schema.
