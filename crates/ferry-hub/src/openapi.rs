//! OpenAPI v2/v3 documents: enough for `kubectl apply` and `kubectl explain` basics.
