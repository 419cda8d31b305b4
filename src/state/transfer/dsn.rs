//! PostgreSQL connection strings in their two forms: the URL (`postgres://u:pw@h/db`) and
//! libpq's `key=value` list (`host=h user=u password=pw dbname=db`). A `key=value` string
//! is turned into the equivalent URL (the driver reads URLs only), and every password a
//! connection string or `PGPASSWORD` carries can be listed, so output can be masked
//! whatever form the operator used.

use std::collections::BTreeSet;

use crate::config::REDACTED;

/// libpq's connection keywords; a string starting with one of them followed by `=` is a
/// `key=value` connection string, not a file name.
const KEYWORDS: &[&str] = &[
    "application_name",
    "channel_binding",
    "client_encoding",
    "connect_timeout",
    "dbname",
    "gssencmode",
    "host",
    "hostaddr",
    "keepalives",
    "options",
    "passfile",
    "password",
    "port",
    "service",
    "sslcert",
    "sslkey",
    "sslmode",
    "sslrootcert",
    "target_session_attrs",
    "user",
];

/// Why a `key=value` string cannot be used. Never holds the string itself.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DsnError {
    #[error(
        "the key=value connection string is malformed near keyword {0}: write it as \
         key=value pairs separated by spaces, quoting values with spaces in single quotes"
    )]
    Malformed(usize),
    #[error("the key=value connection string has a port that is not a number")]
    BadPort,
}

/// Whether `arg` is a libpq `key=value` connection string.
pub fn is_key_value(arg: &str) -> bool {
    let trimmed = arg.trim_start();
    let Some((key, _)) = trimmed.split_once('=') else {
        return false;
    };
    KEYWORDS.contains(&key.trim_end())
}

/// The `key=value` pairs of a libpq connection string, in order. Values may be single
/// quoted (`'a b'`), with `\'` and `\\` as escapes, as libpq reads them.
pub fn parse_key_value(arg: &str) -> Result<Vec<(String, String)>, DsnError> {
    let mut pairs = Vec::new();
    let mut chars = arg.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.peek().is_none() {
            return Ok(pairs);
        }
        let mut key = String::new();
        while let Some(c) = chars.next_if(|c| *c != '=' && !c.is_whitespace()) {
            key.push(c);
        }
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.next() != Some('=') || key.is_empty() {
            return Err(DsnError::Malformed(pairs.len() + 1));
        }
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let mut value = String::new();
        if chars.next_if_eq(&'\'').is_some() {
            loop {
                match chars.next() {
                    None => return Err(DsnError::Malformed(pairs.len() + 1)),
                    Some('\'') => break,
                    Some('\\') => value.extend(chars.next()),
                    Some(c) => value.push(c),
                }
            }
        } else {
            while let Some(c) = chars.next_if(|c| !c.is_whitespace()) {
                if c == '\\' {
                    value.extend(chars.next());
                } else {
                    value.push(c);
                }
            }
        }
        pairs.push((key, value));
    }
}

/// The URL that says what a `key=value` string says: user, password, host, port and
/// database in their places, everything else as query parameters (a socket directory
/// `host=/run/postgresql` too, which the driver reads from there).
pub fn key_value_to_url(arg: &str) -> Result<String, DsnError> {
    let mut url = reqwest::Url::parse("postgres://localhost").expect("a fixed URL parses");
    let mut query: Vec<(String, String)> = Vec::new();
    for (key, value) in parse_key_value(arg)? {
        match key.as_str() {
            "host" if !value.starts_with('/') && !value.is_empty() => {
                url.set_host(Some(&value))
                    .map_err(|_| DsnError::Malformed(0))?;
            }
            "port" => {
                let port = value.parse::<u16>().map_err(|_| DsnError::BadPort)?;
                let _ = url.set_port(Some(port));
            }
            "user" => {
                let _ = url.set_username(&value);
            }
            "password" => {
                let _ = url.set_password(Some(&value));
            }
            "dbname" => url.set_path(&format!("/{value}")),
            _ => query.push((key, value)),
        }
    }
    if !query.is_empty() {
        url.query_pairs_mut().extend_pairs(query);
    }
    Ok(url.to_string())
}

/// Every password `arg` carries (URL user info, a `password` query parameter, a
/// `password=` pair), as written and as decoded, for masking.
pub fn passwords_in(arg: &str) -> Vec<String> {
    let mut found = BTreeSet::new();
    if is_key_value(arg) {
        for (key, value) in parse_key_value(arg).unwrap_or_default() {
            if key == "password" && !value.is_empty() {
                found.insert(value);
            }
        }
        // Whatever the parser made of it, the raw text after `password=` is masked too.
        for part in arg.split("password").skip(1) {
            let value = part
                .trim_start()
                .strip_prefix('=')
                .unwrap_or("")
                .trim_start();
            let value = value.trim_start_matches('\'');
            let value: String = value
                .chars()
                .take_while(|c| !c.is_whitespace() && *c != '\'')
                .collect();
            if !value.is_empty() {
                found.insert(value);
            }
        }
    } else if let Ok(url) = reqwest::Url::parse(arg) {
        if let Some(password) = url.password() {
            found.insert(password.to_owned());
            if let Ok(decoded) = urlencoding_decode(password) {
                found.insert(decoded);
            }
        }
        for (key, value) in url.query_pairs() {
            if key == "password" && !value.is_empty() {
                found.insert(value.into_owned());
            }
        }
    }
    found.into_iter().collect()
}

fn urlencoding_decode(text: &str) -> Result<String, std::string::FromUtf8Error> {
    let mut bytes = Vec::with_capacity(text.len());
    let raw = text.as_bytes();
    let mut i = 0;
    while i < raw.len() {
        if raw[i] == b'%'
            && let Some(byte) = raw
                .get(i + 1..i + 3)
                .and_then(|hex| std::str::from_utf8(hex).ok())
                .and_then(|hex| u8::from_str_radix(hex, 16).ok())
        {
            bytes.push(byte);
            i += 3;
            continue;
        }
        bytes.push(raw[i]);
        i += 1;
    }
    String::from_utf8(bytes)
}

/// Replaces every known password in printed text with the redaction mark.
#[derive(Debug, Default, Clone)]
pub struct PasswordMask {
    secrets: Vec<String>,
}

impl PasswordMask {
    /// Masks the passwords of these connection strings and these plain secrets
    /// (`PGPASSWORD`).
    pub fn new<'a>(
        connection_strings: impl IntoIterator<Item = &'a str>,
        plain: impl IntoIterator<Item = &'a str>,
    ) -> Self {
        let mut secrets: Vec<String> = connection_strings
            .into_iter()
            .flat_map(passwords_in)
            .chain(plain.into_iter().map(str::to_owned))
            .filter(|s| !s.is_empty())
            .collect();
        // Longest first, so a password containing another is masked whole.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets.dedup();
        Self { secrets }
    }

    pub fn mask(&self, text: &str) -> String {
        let mut text = text.to_owned();
        for secret in &self.secrets {
            text = text.replace(secret.as_str(), REDACTED);
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_value_strings_become_urls() {
        assert!(is_key_value("host=db password=pw"));
        assert!(is_key_value("  dbname = hermes"));
        assert!(!is_key_value("/var/lib/hermes/state.db"));
        assert!(!is_key_value("weird=name.db"));
        let url = key_value_to_url(
            "host=db.internal port=5433 user=hermes password='p w\\'x' dbname=hermes sslmode=require",
        )
        .unwrap();
        let parsed = reqwest::Url::parse(&url).unwrap();
        assert_eq!(parsed.host_str(), Some("db.internal"));
        assert_eq!(parsed.port(), Some(5433));
        assert_eq!(parsed.username(), "hermes");
        assert_eq!(
            urlencoding_decode(parsed.password().unwrap()).unwrap(),
            "p w'x"
        );
        assert_eq!(parsed.path(), "/hermes");
        assert_eq!(parsed.query(), Some("sslmode=require"));
        let socket = key_value_to_url("host=/run/postgresql dbname=h").unwrap();
        assert!(socket.contains("host=%2Frun%2Fpostgresql"), "{socket}");
        assert_eq!(key_value_to_url("host=h port=x"), Err(DsnError::BadPort));
        assert!(key_value_to_url("host=h password='open").is_err());
    }

    #[test]
    fn every_form_of_password_is_masked() {
        let mask = PasswordMask::new(
            [
                "postgres://u:url%40pw@h/db",
                "postgresql://h/db?password=querypw",
                "host=h password=kvpw user=u",
                "host=h password = 'quoted pw'",
            ],
            ["envpw"],
        );
        let text = "url@pw url%40pw querypw kvpw quoted pw envpw";
        let masked = mask.mask(text);
        for secret in [
            "url@pw",
            "url%40pw",
            "querypw",
            "kvpw",
            "quoted pw",
            "envpw",
        ] {
            assert!(!masked.contains(secret), "{secret} in {masked}");
        }
    }
}
