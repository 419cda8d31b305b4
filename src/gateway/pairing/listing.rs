//! Reading the store for people: outstanding requests, approved users, lockout time.

use serde_json::Value;

use super::entries::{ApprovedEntry, Slot, number};
use super::files::JsonObject;

type Approved = JsonObject<Slot<ApprovedEntry>>;
type Limits = JsonObject<Value>;
use super::store::lockout_key;
use super::{ApprovedListing, PairingError, PairingStore, PendingRequest, validate_platform};

impl PairingStore {
    /// Outstanding requests (expired ones are removed first), for one platform or all.
    pub fn list_pending(
        &self,
        platform: Option<&str>,
        now: f64,
    ) -> Result<Vec<PendingRequest>, PairingError> {
        let _locked = self.lock()?;
        let mut results = Vec::new();
        for platform in self.platforms(platform, "pending")? {
            let pending = self.cleanup_expired(&platform, now)?;
            for slot in pending.values() {
                let Some(created_at) = slot.created_at() else {
                    continue;
                };
                results.push(PendingRequest {
                    platform: platform.clone(),
                    code: slot
                        .hash()
                        .map(|h| h.chars().take(8).collect())
                        .unwrap_or_else(|| "legacy".to_owned()),
                    user_id: slot.text_field("user_id"),
                    user_name: slot.text_field("user_name"),
                    age_minutes: ((now - created_at) / 60.0) as i64,
                });
            }
        }
        Ok(results)
    }

    /// Approved users, for one platform or all, in file order.
    pub fn list_approved(
        &self,
        platform: Option<&str>,
    ) -> Result<Vec<ApprovedListing>, PairingError> {
        let mut results = Vec::new();
        for platform in self.platforms(platform, "approved")? {
            let approved: Approved = self.read(&self.paths.approved(&platform))?;
            for (user_id, slot) in approved {
                let approved_at = match &slot {
                    Slot::Known(entry) => Some(entry.approved_at),
                    Slot::Other(value) => value.get("approved_at").and_then(Value::as_f64),
                };
                results.push(ApprovedListing {
                    platform: platform.clone(),
                    user_id,
                    user_name: slot.text_field("user_name"),
                    approved_at,
                });
            }
        }
        Ok(results)
    }

    /// Seconds of lockout left on `platform` at `now` (0 when not locked).
    pub fn lockout_remaining(&self, platform: &str, now: f64) -> Result<f64, PairingError> {
        validate_platform(platform)?;
        let limits: Limits = self.read(&self.paths.rate_limits())?;
        Ok((number(&limits, &lockout_key(platform)) - now).max(0.0))
    }

    /// The platform asked for, or every platform with a `-{suffix}.json` file, sorted.
    fn platforms(&self, only: Option<&str>, suffix: &str) -> Result<Vec<String>, PairingError> {
        if let Some(platform) = only {
            validate_platform(platform)?;
            return Ok(vec![platform.to_owned()]);
        }
        let names = self.backing().file_names(&self.paths.dir).map_err(|e| {
            PairingError::io(format!("cannot list {}", self.paths.dir.display()), e)
        })?;
        let ending = format!("-{suffix}.json");
        let mut platforms: Vec<String> = names
            .iter()
            .filter_map(|name| {
                let platform = name.strip_suffix(&ending)?;
                validate_platform(platform).ok()?;
                Some(platform.to_owned())
            })
            .collect();
        platforms.sort();
        Ok(platforms)
    }
}
