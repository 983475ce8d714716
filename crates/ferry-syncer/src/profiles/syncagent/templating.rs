//! Go templates as the reference evaluates them (`internal/sync/templating`): Go's
//! `text/template` language (through `gtmpl`), output trimmed of surrounding
//! whitespace, with the agent's functions `sha3sum`, `sha3short [len=20]` and the legacy
//! `shortHash` (SHA-1, 20 hex characters), plus the sprig functions naming rules and
//! mutations use most. Data is JSON: objects are Go maps (a missing key is "no
//! value", which string functions read as `""`).

use base64::Engine as _;
use gtmpl::{Context, FuncError, Template, Value as Tv};
use serde_json::Value;
use sha2::Digest as _;

/// Renders `template` over `data` (a JSON object whose top-level keys are the
/// context's fields, `Object`, `ClusterName`, ...). The error says what failed, for
/// messages that name the template's field.
pub fn render(template: &str, data: &Value) -> Result<String, String> {
    let mut t = Template::default();
    t.add_funcs(&FUNCS);
    t.parse(template).map_err(|e| format!("does not parse: {e}"))?;
    let ctx = Context::from(context(data));
    let out = t.render(&ctx).map_err(|e| format!("fails to evaluate: {e}"))?;
    Ok(out.trim().to_string())
}

/// The top level is a struct in the reference (a missing field is an error); below
/// it, maps.
fn context(data: &Value) -> Tv {
    match data {
        Value::Object(map) => Tv::Object(map.iter().map(|(k, v)| (k.clone(), to_tv(v))).collect()),
        other => to_tv(other),
    }
}

fn to_tv(v: &Value) -> Tv {
    match v {
        Value::Null => Tv::Nil,
        Value::Bool(b) => Tv::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Tv::from(i),
            (_, Some(u)) => Tv::from(u),
            _ => Tv::from(n.as_f64().unwrap_or_default()),
        },
        Value::String(s) => Tv::String(s.clone()),
        Value::Array(items) => Tv::Array(items.iter().map(to_tv).collect()),
        Value::Object(map) => Tv::Map(map.iter().map(|(k, v)| (k.clone(), to_tv(v))).collect()),
    }
}

/// A value as a string argument: no value and nil are `""`.
fn text(v: &Tv) -> String {
    match v {
        Tv::NoValue | Tv::Nil => String::new(),
        other => other.to_string(),
    }
}

fn int(v: &Tv, func: &str) -> Result<i64, FuncError> {
    match v {
        Tv::Number(n) => n
            .as_i64()
            .ok_or_else(|| FuncError::Generic(format!("{func}: {n} is not an integer"))),
        Tv::String(s) => s
            .parse()
            .map_err(|_| FuncError::Generic(format!("{func}: {s:?} is not an integer"))),
        other => Err(FuncError::Generic(format!("{func}: {other} is not an integer"))),
    }
}

fn exactly(args: &[Tv], n: usize, func: &str) -> Result<(), FuncError> {
    if args.len() == n {
        Ok(())
    } else {
        Err(FuncError::ExactlyXArgs(func.into(), n))
    }
}

/// `sha3sum STRING`: the hex SHA3-256.
pub fn sha3sum(input: &str) -> String {
    hex::encode(sha3::Sha3_256::digest(input.as_bytes()))
}

/// The reference's legacy `shortHash`: the first 20 hex characters of the SHA-1.
pub fn short_hash(input: &str) -> String {
    sha1_smol::Sha1::from(input).digest().to_string()[..20].to_string()
}

macro_rules! unary {
    ($name:ident, $label:literal, |$s:ident| $body:expr) => {
        fn $name(args: &[Tv]) -> Result<Tv, FuncError> {
            exactly(args, 1, $label)?;
            let $s = text(&args[0]);
            Ok(Tv::String($body))
        }
    };
}

unary!(f_sha3sum, "sha3sum", |s| sha3sum(&s));
unary!(f_short_hash, "shortHash", |s| short_hash(&s));
unary!(f_sha1sum, "sha1sum", |s| sha1_smol::Sha1::from(s)
    .digest()
    .to_string());
unary!(f_sha256sum, "sha256sum", |s| hex::encode(sha2::Sha256::digest(
    s.as_bytes()
)));
unary!(f_lower, "lower", |s| s.to_lowercase());
unary!(f_upper, "upper", |s| s.to_uppercase());
unary!(f_trim, "trim", |s| s.trim().to_string());
unary!(f_b64enc, "b64enc", |s| base64::engine::general_purpose::STANDARD
    .encode(s));
unary!(f_quote, "quote", |s| format!("{s:?}"));
unary!(f_nospace, "nospace", |s| s.split_whitespace().collect());

fn f_sha3short(args: &[Tv]) -> Result<Tv, FuncError> {
    let len = match args.len() {
        1 => 20,
        2 => int(&args[1], "sha3short")?,
        _ => {
            return Err(FuncError::Generic(format!(
                "sha3short: expected at most one length argument, got {}",
                args.len().saturating_sub(1)
            )))
        }
    };
    if len <= 0 {
        return Err(FuncError::Generic(format!("sha3short: invalid length {len}")));
    }
    let hash = sha3sum(&text(&args[0]));
    let len = usize::try_from(len).unwrap_or(usize::MAX).min(hash.len());
    Ok(Tv::String(hash[..len].to_string()))
}

fn f_b64dec(args: &[Tv]) -> Result<Tv, FuncError> {
    exactly(args, 1, "b64dec")?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text(&args[0]))
        .map_err(|e| FuncError::Generic(format!("b64dec: {e}")))?;
    Ok(Tv::String(String::from_utf8_lossy(&bytes).into_owned()))
}

fn f_trim_prefix(args: &[Tv]) -> Result<Tv, FuncError> {
    exactly(args, 2, "trimPrefix")?;
    let (prefix, s) = (text(&args[0]), text(&args[1]));
    Ok(Tv::String(
        s.strip_prefix(prefix.as_str()).unwrap_or(&s).to_string(),
    ))
}

fn f_trim_suffix(args: &[Tv]) -> Result<Tv, FuncError> {
    exactly(args, 2, "trimSuffix")?;
    let (suffix, s) = (text(&args[0]), text(&args[1]));
    Ok(Tv::String(
        s.strip_suffix(suffix.as_str()).unwrap_or(&s).to_string(),
    ))
}

fn f_replace(args: &[Tv]) -> Result<Tv, FuncError> {
    exactly(args, 3, "replace")?;
    Ok(Tv::String(
        text(&args[2]).replace(&text(&args[0]), &text(&args[1])),
    ))
}

/// sprig's `trunc N s`: the first N characters (negative: the last -N).
fn f_trunc(args: &[Tv]) -> Result<Tv, FuncError> {
    exactly(args, 2, "trunc")?;
    let n = int(&args[0], "trunc")?;
    let chars: Vec<char> = text(&args[1]).chars().collect();
    let len = i64::try_from(chars.len()).unwrap_or(i64::MAX);
    let out: String = if n >= 0 {
        chars
            .iter()
            .take(usize::try_from(n.min(len)).unwrap_or(0))
            .collect()
    } else {
        let skip = usize::try_from((len + n).max(0)).unwrap_or(0);
        chars.iter().skip(skip).collect()
    };
    Ok(Tv::String(out))
}

/// sprig's `default D v`: `v` unless it is empty.
fn f_default(args: &[Tv]) -> Result<Tv, FuncError> {
    exactly(args, 2, "default")?;
    let empty = match &args[1] {
        Tv::NoValue | Tv::Nil => true,
        Tv::String(s) => s.is_empty(),
        Tv::Bool(b) => !b,
        Tv::Array(a) => a.is_empty(),
        Tv::Map(m) | Tv::Object(m) => m.is_empty(),
        Tv::Number(n) => n.as_f64() == Some(0.0),
        Tv::Function(_) => false,
    };
    Ok(if empty { args[0].clone() } else { args[1].clone() })
}

fn f_join(args: &[Tv]) -> Result<Tv, FuncError> {
    exactly(args, 2, "join")?;
    let sep = text(&args[0]);
    let parts: Vec<String> = match &args[1] {
        Tv::Array(items) => items.iter().map(text).collect(),
        other => vec![text(other)],
    };
    Ok(Tv::String(parts.join(&sep)))
}

fn predicate(args: &[Tv], func: &str, f: impl Fn(&str, &str) -> bool) -> Result<Tv, FuncError> {
    exactly(args, 2, func)?;
    Ok(Tv::Bool(f(&text(&args[1]), &text(&args[0]))))
}

fn f_contains(args: &[Tv]) -> Result<Tv, FuncError> {
    predicate(args, "contains", |s, sub| s.contains(sub))
}

fn f_has_prefix(args: &[Tv]) -> Result<Tv, FuncError> {
    predicate(args, "hasPrefix", |s, p| s.starts_with(p))
}

fn f_has_suffix(args: &[Tv]) -> Result<Tv, FuncError> {
    predicate(args, "hasSuffix", |s, p| s.ends_with(p))
}

static FUNCS: [(&str, gtmpl::Func); 24] = [
    ("sha3sum", f_sha3sum),
    ("sha3short", f_sha3short),
    ("shortHash", f_short_hash),
    ("sha1sum", f_sha1sum),
    ("sha256sum", f_sha256sum),
    ("lower", f_lower),
    ("upper", f_upper),
    ("trim", f_trim),
    ("trimPrefix", f_trim_prefix),
    ("trimSuffix", f_trim_suffix),
    ("replace", f_replace),
    ("trunc", f_trunc),
    ("default", f_default),
    ("join", f_join),
    ("b64enc", f_b64enc),
    ("b64dec", f_b64dec),
    ("quote", f_quote),
    ("nospace", f_nospace),
    ("contains", f_contains),
    ("hasPrefix", f_has_prefix),
    ("hasSuffix", f_has_suffix),
    ("trimAll", f_trim_all),
    ("title", f_title),
    ("squote", f_squote),
];

fn f_trim_all(args: &[Tv]) -> Result<Tv, FuncError> {
    exactly(args, 2, "trimAll")?;
    let cut: Vec<char> = text(&args[0]).chars().collect();
    Ok(Tv::String(
        text(&args[1]).trim_matches(|c| cut.contains(&c)).to_string(),
    ))
}

fn f_title(args: &[Tv]) -> Result<Tv, FuncError> {
    exactly(args, 1, "title")?;
    let out = text(&args[0])
        .split(' ')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_uppercase().chain(c).collect::<String>())
                .unwrap_or_default()
        })
        .collect::<Vec<_>>()
        .join(" ");
    Ok(Tv::String(out))
}

fn f_squote(args: &[Tv]) -> Result<Tv, FuncError> {
    exactly(args, 1, "squote")?;
    Ok(Tv::String(format!("'{}'", text(&args[0]))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ctx() -> Value {
        json!({
            "Object": { "metadata": { "name": "my-db", "namespace": "default", "labels": { "team": "a" } },
                        "spec": { "size": 3 } },
            "ClusterName": "abc123",
            "ClusterPath": "root:c1",
        })
    }

    #[test]
    fn the_default_name_template_matches_the_reference_helpers() {
        let out = render(
            "{{ .Object.metadata.namespace | sha3short }}-{{ .Object.metadata.name | sha3short }}",
            &ctx(),
        )
        .unwrap();
        assert_eq!(
            out,
            format!("{}-{}", &sha3sum("default")[..20], &sha3sum("my-db")[..20])
        );
        assert_eq!(render("  {{ .ClusterName }}\n", &ctx()).unwrap(), "abc123");
    }

    #[test]
    fn functions_take_arguments_and_pipelines() {
        let c = ctx();
        assert_eq!(
            render("{{ sha3short .Object.metadata.name 8 }}", &c).unwrap(),
            &sha3sum("my-db")[..8]
        );
        assert_eq!(
            render("{{ .Object.metadata.name | shortHash }}", &c).unwrap(),
            short_hash("my-db")
        );
        assert_eq!(short_hash("").len(), 20);
        assert_eq!(
            render(
                "{{ .Object.metadata.labels.team | upper }}-{{ .ClusterPath | replace \":\" \"-\" }}",
                &c
            )
            .unwrap(),
            "A-root-c1"
        );
        assert_eq!(
            render("{{ .Object.metadata.labels.nope | default \"x\" }}", &c).unwrap(),
            "x"
        );
        assert_eq!(render("{{ trunc 3 .Object.metadata.name }}", &c).unwrap(), "my-");
        assert_eq!(render("{{ .Object.spec.size }}", &c).unwrap(), "3");
    }

    #[test]
    fn errors_say_what_failed() {
        assert!(render("{{ .Object.metadata.name", &ctx())
            .unwrap_err()
            .contains("parse"));
        assert!(render("{{ nosuchfunc 1 }}", &ctx()).is_err());
        assert!(render("{{ sha3short .ClusterName 0 }}", &ctx())
            .unwrap_err()
            .contains("invalid length"));
        assert!(render("{{ .Nope }}", &ctx()).is_err());
    }
}
