//! CRD `pattern`s as regular expressions, matched in time linear in the
//! input.
//!
//! kube-apiserver compiles `pattern` with Go's `regexp` (RE2 syntax, no
//! backtracking). The `regex` crate reads the same syntax with the same
//! guarantees; [`translate`] bridges where the two differ:
//! - Perl classes `\d \w \s` and `\b \B` are ASCII in Go, Unicode here;
//! - inside brackets Go takes `[` (except `[:alpha:]`), `&&`, `~~` and `--`
//!   literally, where the `regex` crate reads nested classes and set
//!   operations;
//! - a `{` or `}` that is not part of a repetition is a literal in Go;
//! - Go quotes literal text with `\Q...\E` and refuses repeat counts over 1000.
//!
//! A compiled program may not exceed [`SIZE_LIMIT`], so a pattern too large
//! is refused when its CRD is written ([`super::crd`]), not when a custom
//! resource is. [`compiled`] keeps compiled patterns in a bounded cache,
//! keyed by the pattern's text, so each is compiled once however many
//! objects it checks.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use parking_lot::Mutex;
use regex::{Regex, RegexBuilder};

/// Largest compiled program one pattern may have (the `regex` crate's
/// default is 10 MiB). Common CRD patterns (DNS names, quantities, URLs,
/// semantic versions) compile to a few KiB; the cap also bounds the cost of
/// matching, which grows with the program's size.
pub const SIZE_LIMIT: usize = 128 * 1024;
/// Memory one thread may use for a pattern's lazy DFA before it falls back
/// to the (still linear) NFA simulation.
const DFA_SIZE_LIMIT: usize = 512 * 1024;
/// Go's `regexp` refuses `{n}` and `{n,m}` above this count.
const MAX_REPEAT: u32 = 1000;
/// Cache bounds: entries, and the bytes of pattern text they are keyed by.
const CACHE_ENTRIES: usize = 4096;
const CACHE_TEXT_BYTES: usize = 16 * 1024 * 1024;

/// Why a pattern cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatternError {
    /// Not a regular expression in RE2 syntax.
    #[error("error parsing regexp: {0}")]
    Syntax(String),
    /// Compiles to a program larger than [`SIZE_LIMIT`].
    #[error(
        "the compiled regular expression is larger than the limit of {limit} bytes; \
         simplify it (fewer or smaller repetitions)"
    )]
    TooLarge { limit: usize },
}

/// A compiled `pattern`.
#[derive(Debug)]
pub struct Pattern {
    regex: Regex,
}

impl Pattern {
    /// Compile `src` with Go's reading of it.
    pub fn compile(src: &str) -> Result<Pattern, PatternError> {
        let translated = translate(src)?;
        RegexBuilder::new(&translated)
            .size_limit(SIZE_LIMIT)
            .dfa_size_limit(DFA_SIZE_LIMIT)
            .build()
            .map(|regex| Pattern { regex })
            .map_err(|e| match e {
                regex::Error::CompiledTooBig(limit) => PatternError::TooLarge { limit },
                other => PatternError::Syntax(syntax_summary(&other.to_string())),
            })
    }

    /// Whether `input` contains a match (unanchored unless the pattern uses
    /// `^`/`$`, as in OpenAPI).
    pub fn is_match(&self, input: &str) -> bool {
        self.regex.is_match(input)
    }
}

/// The one-line reason of a `regex` syntax error (its caret diagram points
/// into the translated pattern, not the one the user wrote).
fn syntax_summary(message: &str) -> String {
    message
        .lines()
        .find_map(|l| l.trim().strip_prefix("error: "))
        .unwrap_or_else(|| message.lines().last().unwrap_or(message).trim())
        .to_string()
}

#[derive(Default)]
struct Cache {
    entries: HashMap<String, Result<Arc<Pattern>, PatternError>>,
    text_bytes: usize,
}

static CACHE: LazyLock<Mutex<Cache>> = LazyLock::new(Default::default);

/// `src` compiled, from the cache when it was compiled before. Failures are
/// cached too, so a bad pattern costs one compilation. When the cache is
/// full it starts over (patterns in use are recompiled once).
pub fn compiled(src: &str) -> Result<Arc<Pattern>, PatternError> {
    if let Some(hit) = CACHE.lock().entries.get(src) {
        return hit.clone();
    }
    // Compile outside the lock: another thread may race us to the same
    // pattern, which costs a second compilation, not a wait.
    let result = Pattern::compile(src).map(Arc::new);
    let mut cache = CACHE.lock();
    if cache.entries.len() >= CACHE_ENTRIES || cache.text_bytes + src.len() > CACHE_TEXT_BYTES {
        cache.entries.clear();
        cache.text_bytes = 0;
    }
    if src.len() <= CACHE_TEXT_BYTES && cache.entries.insert(src.to_string(), result.clone()).is_none() {
        cache.text_bytes += src.len();
    }
    result
}

/// Rewrite an RE2 pattern as Go reads it into the `regex` crate's syntax
/// (see the module docs). Errors are those Go reports before compiling.
pub fn translate(src: &str) -> Result<String, PatternError> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len() + 16);
    let mut i = 0;
    // Inside `[...]`; `class_start`: right after `[` or `[^`, where `]` is literal.
    let mut in_class = false;
    let mut class_start = false;
    while i < chars.len() {
        let c = chars[i];
        i += 1;
        if c == '\\' {
            let Some(&e) = chars.get(i) else {
                return Err(PatternError::Syntax(
                    "trailing backslash at end of expression".into(),
                ));
            };
            i += 1;
            class_start = false;
            match (e, in_class) {
                ('d', true) => out.push_str("0-9"),
                ('d', false) => out.push_str("[0-9]"),
                ('w', true) => out.push_str("0-9A-Za-z_"),
                ('w', false) => out.push_str("[0-9A-Za-z_]"),
                ('s', true) => out.push_str(r"\t\n\f\r "),
                ('s', false) => out.push_str(r"[\t\n\f\r ]"),
                // Nested classes are allowed inside brackets too.
                ('D', _) => out.push_str("[^0-9]"),
                ('W', _) => out.push_str("[^0-9A-Za-z_]"),
                ('S', _) => out.push_str(r"[^\t\n\f\r ]"),
                ('b', false) => out.push_str(r"(?-u:\b)"),
                ('B', false) => out.push_str(r"(?-u:\B)"),
                ('Q', false) => {
                    let rest: String = chars[i..].iter().collect();
                    let (literal, skip) = match rest.find(r"\E") {
                        Some(end) => (&rest[..end], rest[..end].chars().count() + 2),
                        None => (rest.as_str(), rest.chars().count()),
                    };
                    out.push_str(&regex::escape(literal));
                    i += skip;
                }
                (e, _) => {
                    out.push('\\');
                    out.push(e);
                }
            }
            continue;
        }
        if in_class {
            match c {
                ']' if !class_start => {
                    in_class = false;
                    out.push(']');
                }
                '[' if chars.get(i) == Some(&':') => {
                    // A POSIX class such as `[:alpha:]`: copy it through `:]`.
                    out.push('[');
                    while i < chars.len() {
                        out.push(chars[i]);
                        i += 1;
                        if out.ends_with(":]") {
                            break;
                        }
                    }
                }
                '[' | '&' | '~' => {
                    out.push('\\');
                    out.push(c);
                }
                '-' if out.ends_with('-') && !out.ends_with("\\-") => out.push_str(r"\-"),
                c => out.push(c),
            }
            class_start = false;
            continue;
        }
        match c {
            '[' => {
                in_class = true;
                class_start = true;
                out.push('[');
                if chars.get(i) == Some(&'^') {
                    out.push('^');
                    i += 1;
                }
            }
            '{' => match repetition(&chars[i..]) {
                Some((len, counts)) => {
                    if counts.iter().flatten().any(|&n| n > MAX_REPEAT) {
                        let text: String = chars[i - 1..i + len].iter().collect();
                        return Err(PatternError::Syntax(format!("invalid repeat count: `{text}`")));
                    }
                    out.extend(&chars[i - 1..i + len]);
                    i += len;
                }
                None => out.push_str(r"\{"),
            },
            '}' => out.push_str(r"\}"),
            c => out.push(c),
        }
    }
    Ok(out)
}

/// If `rest` (what follows a `{`) is a repetition `n}`, `n,}` or `n,m}`: its
/// length through `}` and its counts.
fn repetition(rest: &[char]) -> Option<(usize, [Option<u32>; 2])> {
    let end = rest.iter().position(|&c| c == '}')?;
    let body: String = rest[..end].iter().collect();
    let number = |s: &str| -> Option<u32> {
        if s.is_empty() || !s.chars().all(|c| c.is_ascii_digit()) {
            return None;
        }
        // Counts too large for u32 are over the limit anyway.
        Some(s.parse().unwrap_or(u32::MAX))
    };
    let counts = match body.split_once(',') {
        None => [Some(number(&body)?), None],
        Some((lo, "")) => [Some(number(lo)?), None],
        Some((lo, hi)) => [Some(number(lo)?), Some(number(hi)?)],
    };
    Some((end + 1, counts))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str, s: &str) -> bool {
        Pattern::compile(p)
            .unwrap_or_else(|e| panic!("pattern {p} should compile: {e}"))
            .is_match(s)
    }

    #[test]
    fn anchored_patterns_match_whole_strings() {
        assert!(m("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "my-app"));
        assert!(!m("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "my-app-"));
        assert!(!m("^[a-z]+$", "abc1"));
        assert!(m(r"^\d{3}-\d{2,4}$", "123-45"));
        assert!(!m(r"^\d{3}-\d{2,4}$", "123-45678"));
    }

    #[test]
    fn unanchored_patterns_search() {
        assert!(m("b+", "abbbc"));
        assert!(!m("x", "abc"));
        assert!(m("", "anything"));
    }

    #[test]
    fn alternation_groups_and_classes() {
        assert!(m("^(Always|Never|IfNotPresent)$", "Never"));
        assert!(!m("^(?:Always|Never)$", "Sometimes"));
        assert!(m(r"^[^\s/]+\.(com|org)$", "example.org"));
        assert!(!m(r"^[^\s/]+\.(com|org)$", "exa mple.org"));
        assert!(m(r"^\w+@\w+\.\w+$", "a_b@c.de"));
        assert!(m("^a.c$", "abc"));
        assert!(m("^(ab)*$", ""));
        assert!(m("^(a*)*b$", "aaab"));
        assert!(m("^[-+]?[0-9]*\\.?[0-9]+$", "-1.5"));
        assert!(m(r"^https?:\/\/[^\/]+$", "https://example.org"));
        assert!(m("^[[:alpha:]]+$", "abc"));
    }

    #[test]
    fn backtracking_patterns_are_decided_in_linear_time() {
        // A backtracking matcher takes exponential time here; the answer is
        // still exact (the trailing `!` is not an `a`).
        let start = std::time::Instant::now();
        let input = format!("{}!", "a".repeat(100_000));
        assert!(!m("^(a|a)*$", &input));
        assert!(!m("^(a+)+$", &input));
        assert!(m("^(a|a)*$", &"a".repeat(100_000)));
        assert!(start.elapsed() < std::time::Duration::from_secs(5));
    }

    #[test]
    fn perl_classes_and_word_boundaries_are_ascii_as_in_go() {
        assert!(!m(r"^\d+$", "١٢٣"), "Arabic-Indic digits are not \\d in Go");
        assert!(!m(r"^\w+$", "é"));
        assert!(m(r"^\W$", "é"));
        assert!(!m(r"^\s$", "\u{a0}"));
        assert!(m(r"^[\d.]+$", "1.5"));
        assert!(m(r"^[^\D]+$", "42"));
        assert!(m(r"\bis\b", "this is"));
    }

    #[test]
    fn go_literals_in_brackets_braces_and_quotes() {
        assert!(m("^[[]$", "["));
        assert!(m("^[a&&b]+$", "a&b"));
        assert!(m("^[a~~]+$", "~a"));
        assert!(m("^a{$", "a{"));
        assert!(m("^a{,2}$", "a{,2}"));
        assert!(m("^}$", "}"));
        assert!(m(r"^\Q.*\E$", ".*"));
        assert!(!m(r"^\Q.*\E$", "ab"));
        assert!(m("^[]a]+$", "]a"));
    }

    #[test]
    fn translation_leaves_re2_syntax_alone() {
        assert_eq!(translate("^[a-z]{1,3}(x|y)?$").unwrap(), "^[a-z]{1,3}(x|y)?$");
        assert_eq!(translate(r"\d[\w-]").unwrap(), r"[0-9][0-9A-Za-z_-]");
        assert_eq!(translate(r"\b").unwrap(), r"(?-u:\b)");
    }

    #[test]
    fn invalid_patterns_are_errors_naming_the_problem() {
        let err = |p: &str| Pattern::compile(p).unwrap_err();
        assert_eq!(err("(a"), PatternError::Syntax("unclosed group".into()));
        assert!(matches!(err("[z-a]"), PatternError::Syntax(_)));
        assert!(
            matches!(err("(?=a)"), PatternError::Syntax(_)),
            "no lookaround in RE2"
        );
        assert!(
            matches!(err(r"(a)\1"), PatternError::Syntax(_)),
            "no backreferences in RE2"
        );
        assert!(matches!(err("a\\"), PatternError::Syntax(_)));
        assert_eq!(
            err("a{1001}"),
            PatternError::Syntax("invalid repeat count: `{1001}`".into())
        );
    }

    #[test]
    fn huge_programs_are_refused() {
        let e = Pattern::compile("((a{1000}){1000}){1000}").unwrap_err();
        assert_eq!(e, PatternError::TooLarge { limit: SIZE_LIMIT });
        let e = Pattern::compile(&"[a-z]{1000}".repeat(50)).unwrap_err();
        assert_eq!(e, PatternError::TooLarge { limit: SIZE_LIMIT });
    }

    #[test]
    fn the_cache_returns_one_compilation_and_remembers_failures() {
        let a = compiled("^cache-test-[0-9]+$").unwrap();
        let b = compiled("^cache-test-[0-9]+$").unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert!(compiled("(cache-test").is_err());
        assert!(CACHE.lock().entries.contains_key("(cache-test"));
    }
}
