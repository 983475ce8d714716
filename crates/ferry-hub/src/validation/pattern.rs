//! A small backtracking matcher for the ECMA-262 regular expressions CRD
//! schemas use in `pattern` (no regex crate is available).
//!
//! Supported: literals, `.`, `^`, `$`, classes `[a-z_]`/`[^...]`, escapes
//! `\d \D \w \W \s \S` and escaped punctuation, groups `(...)`/`(?:...)`,
//! alternation `|`, quantifiers `* + ? {n} {n,} {n,m}` (lazy forms accepted).
//! Not supported (the pattern [`Pattern::parse`] returns `None` and the caller
//! skips the check): lookaround, backreferences, named groups, `\b`, unicode
//! classes. Matching is a search (unanchored unless the pattern uses `^`/`$`),
//! as in OpenAPI.

/// A compiled pattern.
#[derive(Debug, Clone)]
pub struct Pattern {
    alternatives: Vec<Vec<Node>>,
}

#[derive(Debug, Clone)]
enum ClassItem {
    Range(char, char),
    Digit(bool),
    Word(bool),
    Space(bool),
}

#[derive(Debug, Clone)]
enum Node {
    Char(char),
    Any,
    Class {
        items: Vec<ClassItem>,
        negated: bool,
    },
    Start,
    End,
    Group(Vec<Vec<Node>>),
    Repeat {
        node: Box<Node>,
        min: u32,
        max: Option<u32>,
    },
}

/// Work bound for one match; patterns that need more are treated as matching
/// rather than stalling a request.
const STEP_LIMIT: usize = 200_000;
/// Inputs longer than this are not checked (recursion depth grows with input).
const MAX_INPUT_CHARS: usize = 4096;

impl Pattern {
    /// Compile `src`, or `None` if it uses syntax this matcher does not support.
    pub fn parse(src: &str) -> Option<Pattern> {
        let chars: Vec<char> = src.chars().collect();
        let mut p = Parser {
            chars: &chars,
            pos: 0,
        };
        let alternatives = p.alternation()?;
        (p.pos == chars.len()).then_some(Pattern { alternatives })
    }

    /// Whether `input` contains a match. Inputs too long or too costly to
    /// check are reported as matching.
    pub fn is_match(&self, input: &str) -> bool {
        let s: Vec<char> = input.chars().collect();
        if s.len() > MAX_INPUT_CHARS {
            return true;
        }
        let mut m = Matcher { s: &s, steps: 0 };
        for start in 0..=s.len() {
            if self
                .alternatives
                .iter()
                .any(|seq| m.seq_k(seq, start, &mut |_, _| true))
            {
                return true;
            }
            if m.steps > STEP_LIMIT {
                return true;
            }
        }
        false
    }
}

struct Parser<'a> {
    chars: &'a [char],
    pos: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn next(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += 1;
        Some(c)
    }

    fn alternation(&mut self) -> Option<Vec<Vec<Node>>> {
        let mut alts = vec![self.sequence()?];
        while self.peek() == Some('|') {
            self.pos += 1;
            alts.push(self.sequence()?);
        }
        Some(alts)
    }

    fn sequence(&mut self) -> Option<Vec<Node>> {
        let mut seq = Vec::new();
        while let Some(c) = self.peek() {
            if c == '|' || c == ')' {
                break;
            }
            let atom = self.atom()?;
            let node = self.quantified(atom)?;
            seq.push(node);
        }
        Some(seq)
    }

    fn atom(&mut self) -> Option<Node> {
        match self.next()? {
            '.' => Some(Node::Any),
            '^' => Some(Node::Start),
            '$' => Some(Node::End),
            '(' => {
                if self.peek() == Some('?') {
                    self.pos += 1;
                    if self.next()? != ':' {
                        return None; // lookaround or named group
                    }
                }
                let alts = self.alternation()?;
                (self.next()? == ')').then_some(Node::Group(alts))
            }
            '[' => self.class(),
            '\\' => self.escape(),
            '*' | '+' | '?' | ')' => None,
            '{' if self.quantifier_bounds_ahead() => None,
            c => Some(Node::Char(c)),
        }
    }

    fn escape(&mut self) -> Option<Node> {
        let c = self.next()?;
        let class = |item| {
            Some(Node::Class {
                items: vec![item],
                negated: false,
            })
        };
        match c {
            'd' => class(ClassItem::Digit(false)),
            'D' => class(ClassItem::Digit(true)),
            'w' => class(ClassItem::Word(false)),
            'W' => class(ClassItem::Word(true)),
            's' => class(ClassItem::Space(false)),
            'S' => class(ClassItem::Space(true)),
            _ => Some(Node::Char(self.escaped_literal(c)?)),
        }
    }

    fn escaped_literal(&mut self, c: char) -> Option<char> {
        match c {
            'n' => Some('\n'),
            't' => Some('\t'),
            'r' => Some('\r'),
            'f' => Some('\u{c}'),
            'v' => Some('\u{b}'),
            '0' => Some('\0'),
            'u' => {
                let hex: String = (0..4).map(|_| self.next()).collect::<Option<String>>()?;
                char::from_u32(u32::from_str_radix(&hex, 16).ok()?)
            }
            'x' => {
                let hex: String = (0..2).map(|_| self.next()).collect::<Option<String>>()?;
                char::from_u32(u32::from_str_radix(&hex, 16).ok()?)
            }
            c if c.is_ascii_alphanumeric() => None, // \b, \1, \p{..}: unsupported
            c => Some(c),
        }
    }

    fn class(&mut self) -> Option<Node> {
        let negated = self.peek() == Some('^');
        if negated {
            self.pos += 1;
        }
        let mut items = Vec::new();
        let mut first = true;
        loop {
            let c = self.next()?;
            if c == ']' && !first {
                break;
            }
            first = false;
            let lo = match c {
                '\\' => {
                    let e = self.next()?;
                    match e {
                        'd' => {
                            items.push(ClassItem::Digit(false));
                            continue;
                        }
                        'D' => {
                            items.push(ClassItem::Digit(true));
                            continue;
                        }
                        'w' => {
                            items.push(ClassItem::Word(false));
                            continue;
                        }
                        'W' => {
                            items.push(ClassItem::Word(true));
                            continue;
                        }
                        's' => {
                            items.push(ClassItem::Space(false));
                            continue;
                        }
                        'S' => {
                            items.push(ClassItem::Space(true));
                            continue;
                        }
                        'b' => '\u{8}',
                        e => self.escaped_literal(e)?,
                    }
                }
                c => c,
            };
            let is_range =
                self.peek() == Some('-') && self.chars.get(self.pos + 1).is_some_and(|&n| n != ']');
            if is_range {
                self.pos += 1;
                let hi = match self.next()? {
                    '\\' => {
                        let e = self.next()?;
                        self.escaped_literal(e)?
                    }
                    h => h,
                };
                if hi < lo {
                    return None;
                }
                items.push(ClassItem::Range(lo, hi));
            } else {
                items.push(ClassItem::Range(lo, lo));
            }
        }
        Some(Node::Class { items, negated })
    }

    /// Whether a `{n}`, `{n,}` or `{n,m}` starts at the cursor (after `{`).
    fn quantifier_bounds_ahead(&self) -> bool {
        let rest: String = self.chars[self.pos..].iter().take_while(|&&c| c != '}').collect();
        self.chars.len() > self.pos + rest.chars().count()
            && !rest.is_empty()
            && rest.chars().all(|c| c.is_ascii_digit() || c == ',')
            && rest.chars().next().is_some_and(|c| c.is_ascii_digit())
            && rest.matches(',').count() <= 1
    }

    fn quantified(&mut self, atom: Node) -> Option<Node> {
        let (min, max) = match self.peek() {
            Some('*') => (0, None),
            Some('+') => (1, None),
            Some('?') => (0, Some(1)),
            Some('{') => {
                self.pos += 1;
                if !self.quantifier_bounds_ahead() {
                    self.pos -= 1;
                    return Some(atom);
                }
                let mut body = String::new();
                while let Some(c) = self.next() {
                    if c == '}' {
                        break;
                    }
                    body.push(c);
                }
                self.pos -= 1; // leave the '}' for the common advance below
                let (min, max) = match body.split_once(',') {
                    None => {
                        let n = body.parse().ok()?;
                        (n, Some(n))
                    }
                    Some((lo, "")) => (lo.parse().ok()?, None),
                    Some((lo, hi)) => (lo.parse().ok()?, Some(hi.parse().ok()?)),
                };
                if max.is_some_and(|m| m < min) {
                    return None;
                }
                (min, max)
            }
            _ => return Some(atom),
        };
        self.pos += 1;
        if self.peek() == Some('?') {
            self.pos += 1; // lazy: irrelevant for match / no match
        }
        if matches!(atom, Node::Start | Node::End) {
            return Some(atom);
        }
        Some(Node::Repeat {
            node: Box::new(atom),
            min,
            max,
        })
    }
}

struct Matcher<'a> {
    s: &'a [char],
    steps: usize,
}

fn class_matches(items: &[ClassItem], negated: bool, c: char) -> bool {
    let hit = items.iter().any(|item| match *item {
        ClassItem::Range(lo, hi) => (lo..=hi).contains(&c),
        ClassItem::Digit(neg) => c.is_ascii_digit() != neg,
        ClassItem::Word(neg) => (c.is_ascii_alphanumeric() || c == '_') != neg,
        ClassItem::Space(neg) => c.is_whitespace() != neg,
    });
    hit != negated
}

impl Matcher<'_> {
    fn node(&mut self, node: &Node, i: usize, k: &mut dyn FnMut(&mut Self, usize) -> bool) -> bool {
        self.steps += 1;
        if self.steps > STEP_LIMIT {
            return true;
        }
        let s = self.s;
        match node {
            Node::Char(c) => i < s.len() && s[i] == *c && k(self, i + 1),
            Node::Any => i < s.len() && s[i] != '\n' && s[i] != '\r' && k(self, i + 1),
            Node::Class { items, negated } => {
                i < s.len() && class_matches(items, *negated, s[i]) && k(self, i + 1)
            }
            Node::Start => i == 0 && k(self, i),
            Node::End => i == s.len() && k(self, i),
            Node::Group(alts) => alts.iter().any(|seq| self.seq_k(seq, i, k)),
            Node::Repeat { node, min, max } => self.repeat(node, *min, *max, 0, i, k),
        }
    }

    fn seq_k(&mut self, seq: &[Node], i: usize, k: &mut dyn FnMut(&mut Self, usize) -> bool) -> bool {
        match seq.split_first() {
            None => k(self, i),
            Some((node, rest)) => self.node(node, i, &mut |m: &mut Self, j| m.seq_k(rest, j, k)),
        }
    }

    fn repeat(
        &mut self,
        node: &Node,
        min: u32,
        max: Option<u32>,
        count: u32,
        i: usize,
        k: &mut dyn FnMut(&mut Self, usize) -> bool,
    ) -> bool {
        if max.is_none_or(|m| count < m) {
            let more = self.node(node, i, &mut |m: &mut Self, j| {
                // A repetition that consumed nothing cannot make progress.
                if j == i && count >= min {
                    return false;
                }
                m.repeat(node, min, max, count + 1, j, k)
            });
            if more {
                return true;
            }
        }
        count >= min && k(self, i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str, s: &str) -> bool {
        Pattern::parse(p)
            .unwrap_or_else(|| panic!("pattern {p} should parse"))
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
    }

    #[test]
    fn unsupported_syntax_is_not_compiled() {
        assert!(Pattern::parse("(?=a)").is_none());
        assert!(Pattern::parse(r"\bword").is_none());
        assert!(Pattern::parse("(a").is_none());
        assert!(Pattern::parse("[z-a]").is_none());
    }

    #[test]
    fn catastrophic_patterns_give_up_as_matching() {
        let input = format!("{}!", "a".repeat(40));
        assert!(m("^(a|a)*$", &input));
    }
}
