//! Content negotiation: which representation the client asked for.

use http::HeaderMap;

/// The representation of objects in a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The objects themselves.
    Object,
    /// `meta.k8s.io/v1` PartialObjectMetadata(List): metadata only.
    Metadata,
    /// `meta.k8s.io/v1` Table, for `kubectl get`.
    Table,
}

fn media_types(headers: &HeaderMap) -> Vec<Vec<(String, String)>> {
    let accept = headers
        .get(http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    accept
        .split(',')
        .map(|m| {
            m.split(';')
                .enumerate()
                .map(|(i, p)| {
                    let p = p.trim();
                    if i == 0 {
                        ("".to_string(), p.to_string())
                    } else {
                        let (k, v) = p.split_once('=').unwrap_or((p, ""));
                        (k.trim().to_string(), v.trim().to_string())
                    }
                })
                .collect()
        })
        .collect()
}

fn param<'a>(mt: &'a [(String, String)], key: &str) -> Option<&'a str> {
    mt.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

/// The first representation in the Accept header the hub can produce.
pub fn object_format(headers: &HeaderMap) -> Format {
    for mt in media_types(headers) {
        let base = param(&mt, "").unwrap_or("");
        if !(base == "application/json" || base == "application/yaml" || base == "*/*" || base.is_empty()) {
            continue;
        }
        match (param(&mt, "as"), param(&mt, "g")) {
            (Some("Table"), Some("meta.k8s.io")) => return Format::Table,
            (Some("PartialObjectMetadata" | "PartialObjectMetadataList"), Some("meta.k8s.io")) => {
                return Format::Metadata
            }
            (None, _) => return Format::Object,
            _ => continue,
        }
    }
    Format::Object
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(accept: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(http::header::ACCEPT, accept.parse().unwrap());
        h
    }

    #[test]
    fn kubectl_get_asks_for_a_table() {
        let a = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert_eq!(object_format(&h(a)), Format::Table);
        assert_eq!(
            object_format(&h(
                "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
            )),
            Format::Metadata
        );
        assert_eq!(object_format(&h("application/json")), Format::Object);
        assert_eq!(object_format(&HeaderMap::new()), Format::Object);
    }
}
