//! The console's files, embedded in the binary, and the headers they are
//! served with.

use http::header::{HeaderMap, HeaderName, HeaderValue};

/// One embedded file.
#[derive(Clone, Copy)]
pub struct Asset {
    pub name: &'static str,
    pub content_type: &'static str,
    pub body: &'static [u8],
}

/// Every file the console serves, by name under `/console/`.
pub const ASSETS: &[Asset] = &[
    Asset {
        name: "index.html",
        content_type: "text/html; charset=utf-8",
        body: include_bytes!("assets/index.html"),
    },
    Asset {
        name: "app.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("assets/app.js"),
    },
    Asset {
        name: "api.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("assets/api.js"),
    },
    Asset {
        name: "views.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("assets/views.js"),
    },
    Asset {
        name: "style.css",
        content_type: "text/css; charset=utf-8",
        body: include_bytes!("assets/style.css"),
    },
];

/// The embedded file `name`, if the console has one.
pub fn asset(name: &str) -> Option<&'static Asset> {
    ASSETS.iter().find(|a| a.name == name)
}

/// Scripts and styles only from the console's own files (no inline script,
/// no `eval`), requests only to the origin that served the page (the hub, or
/// `ferry console`), and no page may frame the console.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// Set the headers every console response carries: the CSP, no framing
/// (also for browsers that predate `frame-ancestors`), no content sniffing,
/// no referrer (workspace names in the fragment stay on the page) and no
/// caching of a page that may show what a token could read.
pub fn security_headers(headers: &mut HeaderMap) {
    let set: [(&str, &str); 5] = [
        ("content-security-policy", CONTENT_SECURITY_POLICY),
        ("x-frame-options", "DENY"),
        ("x-content-type-options", "nosniff"),
        ("referrer-policy", "no-referrer"),
        ("cache-control", "no-store"),
    ];
    for (name, value) in set {
        headers.insert(HeaderName::from_static(name), HeaderValue::from_static(value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_the_page_loads_is_embedded_with_its_type() {
        let index = std::str::from_utf8(asset("index.html").unwrap().body).unwrap();
        for file in ["app.js", "style.css"] {
            assert!(index.contains(file), "index.html loads {file}");
        }
        assert_eq!(
            asset("app.js").unwrap().content_type,
            "text/javascript; charset=utf-8"
        );
        assert_eq!(
            asset("style.css").unwrap().content_type,
            "text/css; charset=utf-8"
        );
        assert!(asset("../Cargo.toml").is_none());
    }

    #[test]
    fn the_modules_import_only_embedded_files() {
        for a in ASSETS.iter().filter(|a| a.name.ends_with(".js")) {
            let text = std::str::from_utf8(a.body).unwrap();
            for line in text.lines().filter(|l| l.starts_with("import ")) {
                let file = line
                    .rsplit("./")
                    .next()
                    .unwrap()
                    .trim_end_matches(['"', '\'', ';']);
                assert!(
                    asset(file).is_some(),
                    "{} imports {file}, which is not embedded",
                    a.name
                );
            }
        }
    }

    #[test]
    fn the_page_has_no_inline_script_the_policy_would_block() {
        let index = std::str::from_utf8(asset("index.html").unwrap().body).unwrap();
        let handler = index.match_indices(" on").any(|(i, _)| {
            index[i + 3..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase())
                .count()
                > 0
                && index[i + 3..]
                    .trim_start_matches(|c: char| c.is_ascii_lowercase())
                    .starts_with('=')
        });
        assert!(!index.contains("<script>") && !handler, "{index}");
        assert!(CONTENT_SECURITY_POLICY.contains("frame-ancestors 'none'"));
        assert!(!CONTENT_SECURITY_POLICY.contains("unsafe"));
    }
}
