//! `--token-auth-file`: kube-apiserver's static token CSV,
//! `token,user,uid,"group1,group2"` (the groups column is optional).

use std::collections::HashMap;
use std::path::Path;

use super::UserInfo;

/// One line of a token file.
#[derive(Clone, PartialEq, Eq)]
pub struct StaticToken {
    pub token: String,
    pub user: String,
    pub uid: String,
    pub groups: Vec<String>,
}

impl std::fmt::Debug for StaticToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StaticToken")
            .field("user", &self.user)
            .field("uid", &self.uid)
            .field("groups", &self.groups)
            .finish_non_exhaustive()
    }
}

/// What is wrong with a token file; names the line, never the token.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TokenFileError {
    /// The file could not be read.
    #[error("reading token file {path}: {message}")]
    Read { path: String, message: String },
    /// A line has fewer than the three required columns.
    #[error("token file {path}, line {line}: needs at least 3 columns (token, user name, user uid), found {found}")]
    TooFewColumns { path: String, line: usize, found: usize },
    /// A quoted field is not closed.
    #[error("token file {path}, line {line}: unterminated quoted field")]
    Unterminated { path: String, line: usize },
    /// The user name column is empty.
    #[error("token file {path}, line {line}: the user name (column 2) is empty")]
    EmptyUser { path: String, line: usize },
}

/// Read and parse a token file.
pub fn load(path: &Path) -> Result<Vec<StaticToken>, TokenFileError> {
    let text = std::fs::read_to_string(path).map_err(|e| TokenFileError::Read {
        path: path.display().to_string(),
        message: e.to_string(),
    })?;
    parse(&text, &path.display().to_string())
}

/// Parse token-file text. Blank lines, `#` comments and lines with an empty
/// token are skipped (kube-apiserver warns about the last and skips them too).
pub fn parse(text: &str, path: &str) -> Result<Vec<StaticToken>, TokenFileError> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        if raw.trim().is_empty() || raw.trim_start().starts_with('#') {
            continue;
        }
        let fields = split_csv(raw).ok_or_else(|| TokenFileError::Unterminated {
            path: path.into(),
            line,
        })?;
        if fields.len() < 3 {
            return Err(TokenFileError::TooFewColumns {
                path: path.into(),
                line,
                found: fields.len(),
            });
        }
        if fields[0].is_empty() {
            tracing::warn!(path, line, "empty token in token file; line skipped");
            continue;
        }
        if fields[1].is_empty() {
            return Err(TokenFileError::EmptyUser {
                path: path.into(),
                line,
            });
        }
        let groups = fields
            .get(3)
            .map(|g| {
                g.split(',')
                    .map(str::trim)
                    .filter(|g| !g.is_empty())
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default();
        out.push(StaticToken {
            token: fields[0].clone(),
            user: fields[1].clone(),
            uid: fields[2].clone(),
            groups,
        });
    }
    Ok(out)
}

/// One CSV record (RFC 4180 quoting; leading spaces trimmed, as Go's
/// `TrimLeadingSpace`). `None` if a quote is left open.
fn split_csv(line: &str) -> Option<Vec<String>> {
    let line = line.trim_end_matches('\r');
    let mut fields = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| *c == ' ' || *c == '\t') {
            chars.next();
        }
        let mut field = String::new();
        let mut quoted = chars.peek() == Some(&'"');
        if quoted {
            chars.next();
        }
        loop {
            match chars.next() {
                None if quoted => return None,
                None => {
                    fields.push(field);
                    return Some(fields);
                }
                Some('"') if quoted && chars.peek() == Some(&'"') => {
                    chars.next();
                    field.push('"');
                }
                // A closing quote; text after it (malformed CSV) is kept as is.
                Some('"') if quoted => quoted = false,
                Some(',') if !quoted => break,
                Some(c) => field.push(c),
            }
        }
        fields.push(field);
    }
}

/// The parsed token file, indexed by token.
#[derive(Default)]
pub struct StaticTokens {
    by_token: HashMap<String, UserInfo>,
}

impl StaticTokens {
    pub fn new(tokens: Vec<StaticToken>) -> Self {
        let by_token = tokens
            .into_iter()
            .map(|t| (t.token, UserInfo::new(t.user, t.uid, t.groups)))
            .collect();
        StaticTokens { by_token }
    }

    pub fn lookup(&self, token: &str) -> Option<UserInfo> {
        self.by_token.get(token).cloned()
    }

    pub fn len(&self) -> usize {
        self.by_token.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_token.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_users_groups_and_quoting() {
        let text = "\
# comment
t1,alice,u1,\"dev,ops\"
t2, bob ,u2

t3,carol,u3,single
\"t,4\",dave,u4,\"a \"\"quoted\"\" group\"
";
        let tokens = parse(text, "tokens.csv").unwrap();
        assert_eq!(tokens.len(), 4);
        assert_eq!(tokens[0].user, "alice");
        assert_eq!(tokens[0].groups, vec!["dev", "ops"]);
        assert_eq!(tokens[1].user, "bob ");
        assert!(tokens[1].groups.is_empty());
        assert_eq!(tokens[2].groups, vec!["single"]);
        assert_eq!(tokens[3].token, "t,4");
        assert_eq!(tokens[3].groups, vec!["a \"quoted\" group"]);
        let index = StaticTokens::new(tokens);
        let alice = index.lookup("t1").unwrap();
        assert!(alice.groups.contains(&"system:authenticated".to_string()));
        assert!(index.lookup("nope").is_none());
    }

    #[test]
    fn bad_lines_name_the_line_not_the_token() {
        let e = parse("secret-token,alice\n", "f.csv").unwrap_err();
        assert_eq!(
            e,
            TokenFileError::TooFewColumns {
                path: "f.csv".into(),
                line: 1,
                found: 2
            }
        );
        assert!(!e.to_string().contains("secret-token"));
        assert!(matches!(
            parse("t,\"alice,u\n", "f.csv"),
            Err(TokenFileError::Unterminated { line: 1, .. })
        ));
        assert!(matches!(
            parse("t,,u\n", "f.csv"),
            Err(TokenFileError::EmptyUser { line: 1, .. })
        ));
    }
}
