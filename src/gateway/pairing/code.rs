//! Pairing codes: the reference's constants, random generation, and the salted SHA-256
//! hashes that are the only form in which a code is ever stored.

use std::fmt;

use rand::TryRngCore;
use rand::rngs::OsRng;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The code alphabet: no `0`/`O` and no `1`/`I`, so codes survive being read aloud.
pub const ALPHABET: &str = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789";
/// Characters per code.
pub const CODE_LENGTH: usize = 8;
/// A code older than this (seconds) is expired and removed.
pub const CODE_TTL_SECONDS: f64 = 3600.0;
/// One code request per user per this many seconds.
pub const RATE_LIMIT_SECONDS: f64 = 600.0;
/// How long a platform refuses approvals after too many failed ones.
pub const LOCKOUT_SECONDS: f64 = 3600.0;
/// Outstanding codes allowed per platform.
pub const MAX_PENDING_PER_PLATFORM: usize = 3;
/// Failed approvals on one platform that trigger the lockout.
pub const MAX_FAILED_ATTEMPTS: u64 = 5;

/// Bytes of salt per stored code (Python's `os.urandom(16)`).
const SALT_BYTES: usize = 16;
/// Bytes behind a pending entry's id (Python's `secrets.token_hex(8)`).
const ENTRY_ID_BYTES: usize = 8;

/// A freshly issued pairing code. It is shown to the requesting user and nowhere else, so
/// `Debug` hides it; call [`PairingCode::as_str`] where it is really meant to be shown.
#[derive(Clone, PartialEq, Eq)]
pub struct PairingCode(String);

impl PairingCode {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for PairingCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PairingCode(***)")
    }
}

/// Random bytes from the operating system (the reference uses `secrets`/`os.urandom`).
fn os_random<const N: usize>() -> std::io::Result<[u8; N]> {
    let mut bytes = [0u8; N];
    OsRng
        .try_fill_bytes(&mut bytes)
        .map_err(|e| std::io::Error::other(format!("no randomness from the OS: {e}")))?;
    Ok(bytes)
}

/// A new code: each character uniform over the 32-letter alphabet (256 is a multiple of 32,
/// so masking a random byte introduces no bias).
pub fn generate_code() -> std::io::Result<PairingCode> {
    let alphabet = ALPHABET.as_bytes();
    let bytes = os_random::<CODE_LENGTH>()?;
    let code = bytes
        .iter()
        .map(|b| char::from(alphabet[usize::from(b & 31)]))
        .collect();
    Ok(PairingCode(code))
}

/// A fresh random salt.
pub fn generate_salt() -> std::io::Result<[u8; SALT_BYTES]> {
    os_random::<SALT_BYTES>()
}

/// A fresh pending-entry id: 16 lowercase hex digits.
pub fn generate_entry_id() -> std::io::Result<String> {
    Ok(hex::encode(os_random::<ENTRY_ID_BYTES>()?))
}

/// `sha256(salt + code)` as lowercase hex, the stored form of a code.
pub fn hash_code(code: &str, salt: &[u8]) -> String {
    let mut hasher = Sha256::new();
    hasher.update(salt);
    hasher.update(code.as_bytes());
    hex::encode(hasher.finalize())
}

/// Whether `code` hashes to `stored_hash` under `salt_hex`, compared in constant time.
/// A salt that is not valid hex never matches (the reference skips such entries).
pub fn code_matches(code: &str, salt_hex: &str, stored_hash: &str) -> bool {
    let Ok(salt) = hex::decode(salt_hex) else {
        return false;
    };
    let candidate = hash_code(code, &salt);
    candidate.as_bytes().ct_eq(stored_hash.as_bytes()).into()
}

/// The form a code is compared in: surrounding blanks removed, upper case (approval is
/// case-insensitive).
pub fn normalize_code(code: &str) -> String {
    code.trim().to_uppercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_use_only_the_unambiguous_alphabet() {
        assert_eq!(ALPHABET.len(), 32);
        for banned in ['0', 'O', '1', 'I'] {
            assert!(!ALPHABET.contains(banned));
        }
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..200 {
            let code = generate_code().unwrap();
            assert_eq!(code.as_str().len(), CODE_LENGTH);
            assert!(code.as_str().chars().all(|c| ALPHABET.contains(c)));
            seen.extend(code.as_str().chars());
        }
        // 1,600 draws from 32 letters: every letter shows up unless generation is broken.
        assert_eq!(seen.len(), 32);
    }

    #[test]
    fn hash_is_sha256_of_salt_then_code() {
        // sha256(b"\x00\x01" + b"ABCD"), computed independently.
        let expected = hex::encode(Sha256::digest([0u8, 1, b'A', b'B', b'C', b'D']));
        assert_eq!(hash_code("ABCD", &[0, 1]), expected);
        assert!(code_matches("ABCD", "0001", &expected));
        assert!(!code_matches("ABCE", "0001", &expected));
        assert!(!code_matches("ABCD", "0002", &expected));
        assert!(!code_matches("ABCD", "not hex", &expected));
    }

    #[test]
    fn debug_never_shows_the_code() {
        let code = generate_code().unwrap();
        assert!(!format!("{code:?}").contains(code.as_str()));
        assert_eq!(normalize_code("  abcd2345 \n"), "ABCD2345");
    }

    #[test]
    fn ids_and_salts_have_the_reference_shapes() {
        let id = generate_entry_id().unwrap();
        assert_eq!(id.len(), 16);
        assert!(
            id.chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
        assert_eq!(hex::encode(generate_salt().unwrap()).len(), 32);
    }
}
