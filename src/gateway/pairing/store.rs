//! [`PairingStore`]: the reference's rules (expiry, rate limit, pending cap, lockout) over
//! the pairing files, every change made under both locks.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use serde_json::Value;

use super::approved_cache::ApprovedCache;
use super::backing::{Backing, BackingLock};
use super::code::{self, CODE_TTL_SECONDS, LOCKOUT_SECONDS, MAX_FAILED_ATTEMPTS};
use super::code::{MAX_PENDING_PER_PLATFORM, RATE_LIMIT_SECONDS};
use super::entries::{ApprovedEntry, PendingEntry, Slot, number};
use super::files::{self, JsonObject};
use super::{
    ApproveError, ApprovedUser, PairingError, PairingPaths, PairingRequest, dotenv_sync,
    validate_platform,
};
use crate::coord::SharedFiles;
use crate::home::HermesHome;

type Pending = JsonObject<Slot<PendingEntry>>;
type Approved = JsonObject<Slot<ApprovedEntry>>;
type Limits = JsonObject<Value>;

/// The pairing store of one Hermes home. Cheap to share (`Arc`); all methods take `&self`.
#[derive(Debug)]
pub struct PairingStore {
    pub(super) paths: PairingPaths,
    /// The directory the reference would *not* pick (see `files::resolve_dirs`).
    alternate_dir: PathBuf,
    dotenv: PathBuf,
    /// The process environment, for the `.env` allowlist mirror.
    env: BTreeMap<String, String>,
    /// The files, or the rows standing in for them when instances share PostgreSQL.
    backing: Backing,
    mutex: Mutex<()>,
    approved: ApprovedCache,
}

/// Both locks, held for one read-modify-write.
pub(super) struct Locked<'a> {
    _backing: BackingLock<'a>,
    _mutex: MutexGuard<'a, ()>,
}

fn user_key(user_id: &str) -> &str {
    user_id.trim()
}

/// Whether two user ids name the same principal (the reference compares stripped ids on
/// every platform we serve; WhatsApp aliases are not implemented).
fn same_user(a: &str, b: &str) -> bool {
    let (a, b) = (user_key(a), user_key(b));
    !a.is_empty() && a == b
}

impl PairingStore {
    /// Opens the store of `home`, creating its directory, and heals a split legacy/new
    /// layout the way the reference does.
    pub fn open(home: &HermesHome) -> io::Result<Self> {
        let (active, alternate) = files::resolve_dirs(home.path());
        files::create_dir(&active).map_err(|e| {
            io::Error::new(e.kind(), format!("cannot create {}: {e}", active.display()))
        })?;
        let lock_file = files::open_lock(&active)?;
        let store = Self::with_backing(home, active, alternate, Backing::Files { lock_file });
        {
            let _locked = store.lock().map_err(|e| io::Error::other(e.to_string()))?;
            files::merge_split_dirs(&store.paths.dir, &store.alternate_dir)?;
        }
        Ok(store)
    }

    /// The store of several instances sharing PostgreSQL: the same rules over the shared
    /// copies of the pairing files. The first instance to find no shared pairing files seeds
    /// them from its home's pairing directory, so approvals made before the move carry over;
    /// after that the directory is not read or written.
    pub fn open_shared(home: &HermesHome, shared: impl Into<SharedFiles>) -> io::Result<Self> {
        let shared = shared.into();
        let (active, alternate) = files::resolve_dirs(home.path());
        let store = Self::with_backing(home, active, alternate, Backing::Shared(shared));
        {
            let _locked = store.lock().map_err(|e| io::Error::other(e.to_string()))?;
            store.seed_shared_from_files()?;
        }
        Ok(store)
    }

    /// Copies the home's pairing files into the shared rows when there are none yet.
    fn seed_shared_from_files(&self) -> io::Result<()> {
        let Backing::Shared(shared) = &self.backing else {
            return Ok(());
        };
        if !self.backing.file_names(&self.paths.dir)?.is_empty() {
            return Ok(());
        }
        let Ok(entries) = std::fs::read_dir(&self.paths.dir) else {
            return Ok(());
        };
        for entry in entries.filter_map(Result::ok) {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.ends_with(".json") {
                let bytes = std::fs::read(entry.path())?;
                shared.write(&super::backing::shared_name(&entry.path()), &bytes)?;
                tracing::info!(file = %name, "pairing file copied into the shared database");
            }
        }
        Ok(())
    }

    fn with_backing(
        home: &HermesHome,
        active: PathBuf,
        alternate: PathBuf,
        backing: Backing,
    ) -> Self {
        Self {
            paths: PairingPaths { dir: active },
            alternate_dir: alternate,
            dotenv: home.dotenv(),
            env: BTreeMap::new(),
            backing,
            mutex: Mutex::new(()),
            approved: ApprovedCache::default(),
        }
    }

    /// Sets the process environment used to decide whether an allowlist is configured for
    /// the `.env` mirror (pass the real environment, not one merged with `.env`: the file is
    /// read fresh on every approval).
    pub fn with_env(mut self, env: BTreeMap<String, String>) -> Self {
        self.env = env;
        self
    }

    pub fn paths(&self) -> &PairingPaths {
        &self.paths
    }

    pub(super) fn lock(&self) -> Result<Locked<'_>, PairingError> {
        // The mutex guards no data, so a panic while it was held leaves nothing inconsistent.
        let mutex = self.mutex.lock().unwrap_or_else(|p| p.into_inner());
        let backing = self.backing.lock().map_err(|e| {
            PairingError::io(
                format!(
                    "cannot lock {}",
                    self.paths.dir.join(files::LOCK_FILE).display()
                ),
                e,
            )
        })?;
        Ok(Locked {
            _backing: backing,
            _mutex: mutex,
        })
    }

    fn save<T: serde::Serialize>(&self, path: &Path, value: &T) -> Result<(), PairingError> {
        self.backing
            .save(path, value)
            .map_err(|e| PairingError::io("cannot save", e))
    }

    /// A pairing file's object (missing or unparsable: empty).
    pub(super) fn read<T: serde::de::DeserializeOwned>(
        &self,
        path: &Path,
    ) -> Result<JsonObject<T>, PairingError> {
        Ok(self.backing.read_object(path)?)
    }

    pub(super) fn backing(&self) -> &Backing {
        &self.backing
    }

    /// Handles an unknown user's DM: the reference's gateway check (silent while rate
    /// limited) followed by `generate_code`. Every answered request starts the user's
    /// 10-minute window, so a user gets at most one reply per window.
    pub fn request_code(
        &self,
        platform: &str,
        user_id: &str,
        user_name: &str,
        now: f64,
    ) -> Result<PairingRequest, PairingError> {
        validate_platform(platform)?;
        let _locked = self.lock()?;
        let mut limits: Limits = self.read(&self.paths.rate_limits())?;
        let rate_key = format!("{platform}:{}", user_key(user_id));
        let has_key = !user_key(user_id).is_empty();
        let last_request = limits.get(&rate_key).and_then(Value::as_f64);
        if has_key && last_request.is_some_and(|last| now - last < RATE_LIMIT_SECONDS) {
            return Ok(PairingRequest::RateLimited);
        }
        let mut pending = self.cleanup_expired(platform, now)?;
        let outcome = if now < number(&limits, &lockout_key(platform)) {
            PairingRequest::LockedOut
        } else if pending.len() >= MAX_PENDING_PER_PLATFORM {
            PairingRequest::TooManyPending
        } else {
            let code = code::generate_code().map_err(|e| PairingError::io("pairing code", e))?;
            let salt = code::generate_salt().map_err(|e| PairingError::io("pairing salt", e))?;
            let mut entry_id;
            loop {
                entry_id = code::generate_entry_id().map_err(|e| PairingError::io("id", e))?;
                if !pending.contains_key(&entry_id) {
                    break;
                }
            }
            let entry = PendingEntry {
                hash: code::hash_code(code.as_str(), &salt),
                salt: hex::encode(salt),
                user_id: user_key(user_id).to_owned(),
                user_name: user_name.to_owned(),
                created_at: now,
                rest: Default::default(),
            };
            pending.insert(entry_id, Slot::Known(entry));
            self.save(&self.paths.pending(platform), &pending)?;
            PairingRequest::Issued(code)
        };
        if has_key {
            limits.insert(rate_key, Value::from(now));
            self.save(&self.paths.rate_limits(), &limits)?;
        }
        Ok(outcome)
    }

    /// Approves `code` (any case, surrounding blanks ignored) on `platform`. A wrong code
    /// counts towards the lockout; once locked, nothing is approved until the lockout ends.
    pub fn approve(
        &self,
        platform: &str,
        code: &str,
        now: f64,
    ) -> Result<ApprovedUser, ApproveError> {
        validate_platform(platform)?;
        let _locked = self.lock()?;
        let mut pending = self.cleanup_expired(platform, now)?;
        let code = code::normalize_code(code);
        let mut limits: Limits = self.read(&self.paths.rate_limits())?;
        let until = number(&limits, &lockout_key(platform));
        if now < until {
            return Err(locked_out(platform, until));
        }
        let matched = pending.iter().find_map(|(id, slot)| match slot {
            Slot::Known(entry) if code::code_matches(&code, &entry.salt, &entry.hash) => {
                Some((id.clone(), entry.clone()))
            }
            _ => None,
        });
        let Some((entry_id, entry)) = matched else {
            let failures_key = format!("_failures:{platform}");
            let failures = number(&limits, &failures_key) as u64 + 1;
            let locked_until = (failures >= MAX_FAILED_ATTEMPTS).then_some(now + LOCKOUT_SECONDS);
            match locked_until {
                Some(until) => {
                    limits.insert(lockout_key(platform), Value::from(until));
                    limits.insert(failures_key, Value::from(0u64));
                    tracing::warn!(
                        platform,
                        seconds = LOCKOUT_SECONDS,
                        attempts = MAX_FAILED_ATTEMPTS,
                        "pairing approvals locked out after failed attempts"
                    );
                }
                None => {
                    limits.insert(failures_key, Value::from(failures));
                }
            }
            self.save(&self.paths.rate_limits(), &limits)?;
            return Err(match locked_until {
                Some(until) => locked_out(platform, until),
                None => ApproveError::NotFound {
                    platform: platform.to_owned(),
                },
            });
        };
        pending.shift_remove(&entry_id);
        self.save(&self.paths.pending(platform), &pending)?;

        let approved_path = self.paths.approved(platform);
        let mut approved: Approved = self.read(&approved_path)?;
        approved.retain(|id, _| !same_user(id, &entry.user_id));
        let user_id = user_key(&entry.user_id).to_owned();
        approved.insert(
            user_id.clone(),
            Slot::Known(ApprovedEntry {
                user_name: entry.user_name.clone(),
                approved_at: now,
                rest: Default::default(),
            }),
        );
        self.save(&approved_path, &approved)?;
        // Best effort, as in the reference: the pairing grant above already authorizes.
        if let Err(e) = dotenv_sync::sync_add(&self.dotenv, &self.env, platform, &user_id) {
            tracing::warn!(platform, error = %e, "could not add the approved user to the .env allowlist");
        }
        Ok(ApprovedUser {
            user_id: entry.user_id,
            user_name: entry.user_name,
        })
    }

    /// Removes `user_id`'s approval. Returns whether the user was approved.
    ///
    /// Unlike the reference, the user is also removed from the other pairing directory, so
    /// the next split-directory merge cannot bring the approval back.
    pub fn revoke(&self, platform: &str, user_id: &str) -> Result<bool, PairingError> {
        validate_platform(platform)?;
        let _locked = self.lock()?;
        let mut found = false;
        let alternate = PairingPaths {
            dir: self.alternate_dir.clone(),
        };
        let mut paths = vec![self.paths.approved(platform)];
        if !self.backing.is_shared() {
            paths.push(alternate.approved(platform));
        }
        for path in paths {
            if !self.backing.is_shared() && !path.exists() {
                continue;
            }
            let mut approved: Approved = self.read(&path)?;
            let before = approved.len();
            approved.retain(|id, _| !same_user(id, user_id));
            if approved.len() != before {
                self.save(&path, &approved)?;
                found = true;
            }
        }
        if found
            && let Err(e) = dotenv_sync::sync_remove(&self.dotenv, &self.env, platform, user_id)
        {
            tracing::warn!(platform, error = %e, "could not remove the user from the .env allowlist");
        }
        Ok(found)
    }

    /// Whether `user_id` is approved on `platform`. Answered from memory while the file is
    /// unchanged (see `approved_cache`), so approvals made by another process count at
    /// once; an unreadable file means "no".
    pub fn is_approved(&self, platform: &str, user_id: &str) -> bool {
        if validate_platform(platform).is_err() {
            return false;
        }
        self.approved.contains(
            &self.backing,
            platform,
            &self.paths.approved(platform),
            user_id,
        )
    }

    /// How many times an approvals file was read and parsed (the rest came from memory).
    pub fn approval_file_reads(&self) -> u64 {
        self.approved.reads()
    }

    /// Drops pending entries older than the TTL, and any without a numeric `created_at`;
    /// saves only when something was dropped. Returns what is left. Caller holds the lock.
    pub(super) fn cleanup_expired(
        &self,
        platform: &str,
        now: f64,
    ) -> Result<Pending, PairingError> {
        let path = self.paths.pending(platform);
        let mut pending: Pending = self.read(&path)?;
        let before = pending.len();
        pending.retain(|_, slot| {
            slot.created_at()
                .is_some_and(|created| now - created <= CODE_TTL_SECONDS)
        });
        if pending.len() != before {
            self.save(&path, &pending)?;
        }
        Ok(pending)
    }
}

pub(super) fn lockout_key(platform: &str) -> String {
    format!("_lockout:{platform}")
}

fn locked_out(platform: &str, until: f64) -> ApproveError {
    ApproveError::LockedOut {
        platform: platform.to_owned(),
        until,
    }
}
