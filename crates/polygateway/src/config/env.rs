//! A snapshot of the environment: the process's variables, then an optional `.env` file
//! (the process wins, SPEC §18).

use std::collections::BTreeMap;
use std::path::Path;

use polygateway_errors::{ConfigError, Scope};

/// The configuration variables, read once. Loading from a snapshot instead of the live
/// process environment keeps loading pure (tests build one from pairs) and means a key read
/// twice cannot change in between.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Env {
    vars: BTreeMap<String, String>,
}

impl std::fmt::Debug for Env {
    /// Only the key names: values may be secrets.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.vars.keys()).finish()
    }
}

impl Env {
    /// An environment with exactly these variables.
    pub fn from_pairs<K: Into<String>, V: Into<String>>(
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        Env {
            vars: pairs
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        }
    }

    /// The process environment. Variables whose name or value is not UTF-8 are skipped
    /// unless they would be configuration keys, which is an error naming the key.
    pub fn from_process() -> Result<Self, ConfigError> {
        let mut vars = BTreeMap::new();
        for (key, value) in std::env::vars_os() {
            let Some(key) = key.to_str().map(str::to_owned) else {
                continue;
            };
            match value.into_string() {
                Ok(value) => {
                    vars.insert(key, value);
                }
                Err(_) if super::keys::is_configuration_key(&key) => {
                    return Err(ConfigError::invalid_secret(key, "the value is not UTF-8"));
                }
                Err(_) => {}
            }
        }
        Ok(Env { vars })
    }

    /// The process environment, completed by the `.env` file at `path` when it exists.
    /// A variable set in the process wins over the file.
    pub fn from_process_and_dotenv(path: &Path) -> Result<Self, ConfigError> {
        let mut env = Env::from_process()?;
        env.merge_dotenv(path)?;
        Ok(env)
    }

    /// Add the variables of the `.env` file at `path` that are not set yet. A missing file is
    /// not an error; an unreadable or malformed one is, naming the file and the line number
    /// (never the line, which may hold a secret).
    pub fn merge_dotenv(&mut self, path: &Path) -> Result<(), ConfigError> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => {
                return Err(ConfigError::invalid(
                    path.display().to_string(),
                    "<file>",
                    format!("cannot read the .env file: {e}"),
                ));
            }
        };
        for (key, value) in parse_dotenv(&text).map_err(|line| {
            ConfigError::invalid(
                format!("{}:{line}", path.display()),
                "<line>",
                "expected KEY=VALUE (optionally `export KEY=VALUE`, values may be quoted)",
            )
        })? {
            self.vars.entry(key).or_insert(value);
        }
        Ok(())
    }

    /// The value of `key`; an empty value counts as unset.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.vars
            .get(key)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    /// Whether any key under the scope's prefix (`LLM__`, …) is set.
    pub fn mentions(&self, scope: Scope) -> bool {
        let prefix = format!("{scope}__");
        self.keys_with_prefix(&prefix).next().is_some()
    }

    /// Every variable whose name starts with `prefix`.
    pub(crate) fn keys_with_prefix<'a>(&'a self, prefix: &'a str) -> impl Iterator<Item = &'a str> {
        self.vars
            .range::<str, _>((
                std::ops::Bound::Included(prefix),
                std::ops::Bound::Unbounded,
            ))
            .map(|(k, _)| k.as_str())
            .take_while(move |k| k.starts_with(prefix))
    }
}

/// Parse `.env` text: `KEY=VALUE` lines, `#` comments, blank lines, an optional `export `,
/// values optionally in single quotes (literal) or double quotes (with `\n`, `\"`, `\\`).
/// Returns the 1-based number of the first malformed line on error.
fn parse_dotenv(text: &str) -> Result<Vec<(String, String)>, usize> {
    let mut pairs = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line);
        let (key, value) = line.split_once('=').ok_or(index + 1)?;
        let key = key.trim();
        let valid_key =
            !key.is_empty() && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !valid_key {
            return Err(index + 1);
        }
        let value = unquote(value.trim()).ok_or(index + 1)?;
        pairs.push((key.to_owned(), value));
    }
    Ok(pairs)
}

fn unquote(value: &str) -> Option<String> {
    if let Some(inner) = value.strip_prefix('\'') {
        return inner.strip_suffix('\'').map(str::to_owned);
    }
    if let Some(inner) = value.strip_prefix('"') {
        let inner = inner.strip_suffix('"')?;
        let mut out = String::with_capacity(inner.len());
        let mut chars = inner.chars();
        while let Some(c) = chars.next() {
            if c == '\\' {
                match chars.next()? {
                    'n' => out.push('\n'),
                    other => out.push(other),
                }
            } else {
                out.push(c);
            }
        }
        return Some(out);
    }
    // Unquoted: a ` #` starts a comment.
    let value = value.split(" #").next().unwrap_or(value).trim_end();
    Some(value.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_common_dotenv_forms() {
        let text = "# comment\n\nexport A=1\nB = two words # trailing\nC='lit $x # kept'\nD=\"a\\nb \\\"q\\\"\"\nE=\n";
        let pairs = parse_dotenv(text).expect("valid");
        assert_eq!(
            pairs,
            vec![
                ("A".into(), "1".into()),
                ("B".into(), "two words".into()),
                ("C".into(), "lit $x # kept".into()),
                ("D".into(), "a\nb \"q\"".into()),
                ("E".into(), String::new()),
            ]
        );
    }

    #[test]
    fn malformed_lines_give_their_number() {
        assert_eq!(parse_dotenv("A=1\nno equals sign\n"), Err(2));
        assert_eq!(parse_dotenv("A=1\nB='open\n"), Err(2));
        assert_eq!(parse_dotenv("BAD-KEY=1\n"), Err(1));
    }

    #[test]
    fn process_wins_over_the_file_and_errors_hide_the_line() {
        let dir = std::env::temp_dir().join(format!("pgw-dotenv-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join(".env");
        std::fs::write(&path, "LLM__TIMEOUT_S=5\nLLM__MAX_ATTEMPTS=9\n").expect("write");
        let mut env = Env::from_pairs([("LLM__TIMEOUT_S", "7")]);
        env.merge_dotenv(&path).expect("merge");
        assert_eq!(env.get("LLM__TIMEOUT_S"), Some("7"));
        assert_eq!(env.get("LLM__MAX_ATTEMPTS"), Some("9"));

        std::fs::write(&path, "LLM__SOURCE__A__API_KEY sk-secret-value\n").expect("write");
        let error = Env::default().merge_dotenv(&path).unwrap_err();
        assert!(error.key().ends_with(".env:1"), "{error}");
        assert!(!error.to_string().contains("sk-secret-value"), "{error}");
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn missing_file_is_fine_and_debug_shows_no_values() {
        let mut env = Env::from_pairs([("LLM__SOURCE__A__API_KEY", "sk-secret")]);
        env.merge_dotenv(Path::new("/nonexistent/polygateway/.env"))
            .expect("missing file is not an error");
        assert_eq!(format!("{env:?}"), "{\"LLM__SOURCE__A__API_KEY\"}");
    }

    #[test]
    fn prefix_scan_returns_only_matching_keys() {
        let env = Env::from_pairs([
            ("LLM__A", "1"),
            ("LLM_B", "2"),
            ("LLM__C", "3"),
            ("OCR__D", "4"),
        ]);
        assert_eq!(
            env.keys_with_prefix("LLM__").collect::<Vec<_>>(),
            ["LLM__A", "LLM__C"]
        );
    }
}
