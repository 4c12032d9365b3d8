use std::fmt;
use std::str::FromStr;

/// The three kinds of work that share one engine (SPEC intro). The scope's name is the
/// prefix of its configuration keys and appears in every error and telemetry row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scope {
    /// Chat completions, plain and streaming.
    Llm,
    /// Embeddings, batched.
    Embedding,
    /// Document OCR: text recognition and layout parsing.
    Ocr,
}

impl Scope {
    /// Every scope, in a fixed order.
    pub const ALL: [Scope; 3] = [Scope::Llm, Scope::Embedding, Scope::Ocr];

    /// The scope's name as written in configuration keys: `LLM`, `EMBEDDING`, `OCR`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Scope::Llm => "LLM",
            Scope::Embedding => "EMBEDDING",
            Scope::Ocr => "OCR",
        }
    }

    /// The scope whose configuration prefix (`LLM__`, …) starts `key`, if any.
    pub fn of_key(key: &str) -> Option<Scope> {
        Scope::ALL.into_iter().find(|scope| {
            key.strip_prefix(scope.as_str())
                .is_some_and(|rest| rest.starts_with("__"))
        })
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The text given to [`Scope::from_str`] names no scope.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown scope {0:?}: expected LLM, EMBEDDING or OCR")]
pub struct ParseScopeError(pub String);

impl FromStr for Scope {
    type Err = ParseScopeError;

    /// Case-insensitive, so `--scope llm` works on the command line.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Scope::ALL
            .into_iter()
            .find(|scope| scope.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| ParseScopeError(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_case_insensitively_and_rejects_others() {
        assert_eq!("llm".parse::<Scope>(), Ok(Scope::Llm));
        assert_eq!("Embedding".parse::<Scope>(), Ok(Scope::Embedding));
        assert_eq!("OCR".parse::<Scope>(), Ok(Scope::Ocr));
        assert_eq!(
            "chat".parse::<Scope>().unwrap_err().to_string(),
            "unknown scope \"chat\": expected LLM, EMBEDDING or OCR"
        );
    }

    #[test]
    fn of_key_needs_the_double_underscore() {
        assert_eq!(Scope::of_key("LLM__TIMEOUT_S"), Some(Scope::Llm));
        assert_eq!(Scope::of_key("OCR__SOURCE__A__BASE_URL"), Some(Scope::Ocr));
        assert_eq!(Scope::of_key("LLM_TIMEOUT_S"), None);
        assert_eq!(Scope::of_key("LLMX__TIMEOUT_S"), None);
        assert_eq!(Scope::of_key("REDIS_URL"), None);
    }
}
