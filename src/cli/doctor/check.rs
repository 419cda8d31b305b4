//! One doctor finding: a named check, its verdict, what was seen and how to fix it.

use serde::Serialize;

/// Ordered by severity, so the worst verdict is the maximum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    /// Not checked (`--offline`, or an earlier failure made it meaningless).
    Skip,
    /// Works, but deserves attention (an unreachable endpoint, low disk).
    Warn,
    /// Broken: the gateway will not work (or not safely) until it is fixed.
    Error,
}

impl Status {
    pub fn label(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Skip => "skip",
            Self::Warn => "warn",
            Self::Error => "error",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    pub name: String,
    pub status: Status,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

impl Check {
    pub fn new(name: impl Into<String>, status: Status, message: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            status,
            message: message.into(),
            hint: None,
        }
    }

    pub fn ok(name: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(name, Status::Ok, message)
    }

    pub fn skip(name: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(name, Status::Skip, message)
    }

    pub fn warn(name: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(name, Status::Warn, message)
    }

    pub fn error(name: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(name, Status::Error, message)
    }

    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// `error telegram.token: rejected by getMe (fix: ...)`, on one line.
    pub fn line(&self) -> String {
        let mut line = format!("{:<5} {}: {}", self.status.label(), self.name, self.message);
        if let Some(hint) = &self.hint {
            line.push_str(&format!(" (fix: {hint})"));
        }
        line.replace('\n', " ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_with_the_hint() {
        let check = Check::error("home.permissions", "/h/.env is mode 0644\nreadable")
            .hint("chmod 600 /h/.env");
        assert_eq!(
            check.line(),
            "error home.permissions: /h/.env is mode 0644 readable (fix: chmod 600 /h/.env)"
        );
        assert!(Status::Error > Status::Warn && Status::Warn > Status::Skip);
    }
}
