//! Automatic session resets (`session_reset`, `reset_by_type`, `reset_by_platform`), as
//! Hermes decides them: idle means `now > updated_at + idle_minutes`; daily means the last
//! activity was before the most recent `at_hour:00`. hermesd evaluates hours in UTC.

use crate::config::{Config, ResetMode, SessionResetPolicy};

/// Why a session was reset automatically.
#[derive(Debug, Clone, PartialEq)]
pub enum ResetReason {
    Idle { minutes: u64 },
    Daily { at_hour: u8 },
}

impl ResetReason {
    /// The reason as the reset notice words it.
    pub fn describe(&self) -> String {
        match self {
            Self::Idle { minutes } => format!("inactive for {}h {}m", minutes / 60, minutes % 60),
            Self::Daily { at_hour } => format!("daily schedule at {at_hour}:00"),
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            Self::Idle { .. } => "idle",
            Self::Daily { .. } => "daily",
        }
    }
}

/// The notice sent when an auto-reset session had activity.
pub fn reset_notice(reason: &ResetReason) -> String {
    format!(
        "◐ New session started ({}); the earlier conversation is no longer in context.\n\
         /resume lists past sessions and reopens one.\n\
         When this happens is set under session_reset in config.yaml.",
        reason.describe()
    )
}

/// The policy for a platform and chat type: platform override > type override > default.
pub fn policy_for<'a>(
    config: &'a Config,
    platform: &str,
    chat_type: &str,
) -> &'a SessionResetPolicy {
    config
        .reset_by_platform
        .get(platform)
        .or_else(|| config.reset_by_type.get(chat_type))
        .unwrap_or(&config.session_reset)
}

/// Whether a session last active at `updated_at` must be reset at `now` (epoch seconds).
pub fn should_reset(policy: &SessionResetPolicy, updated_at: f64, now: f64) -> Option<ResetReason> {
    let idle = matches!(policy.mode, ResetMode::Idle | ResetMode::Both);
    let daily = matches!(policy.mode, ResetMode::Daily | ResetMode::Both);
    if idle && now > updated_at + f64::from(policy.idle_minutes) * 60.0 {
        let minutes = ((now - updated_at) / 60.0).max(0.0) as u64;
        return Some(ResetReason::Idle { minutes });
    }
    if daily {
        let day_start = (now / 86_400.0).floor() * 86_400.0;
        let mut boundary = day_start + f64::from(policy.at_hour) * 3600.0;
        if now < boundary {
            boundary -= 86_400.0;
        }
        if updated_at < boundary {
            return Some(ResetReason::Daily {
                at_hour: policy.at_hour,
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(mode: ResetMode) -> SessionResetPolicy {
        SessionResetPolicy {
            mode,
            idle_minutes: 90,
            at_hour: 4,
            ..SessionResetPolicy::default()
        }
    }

    const DAY: f64 = 86_400.0;
    // 2026-11-29 00:00 UTC.
    const MIDNIGHT: f64 = 1_795_910_400.0;

    #[test]
    fn idle_resets_after_the_window_only() {
        let p = policy(ResetMode::Idle);
        assert_eq!(should_reset(&p, 1000.0, 1000.0 + 90.0 * 60.0), None);
        let reason = should_reset(&p, 1000.0, 1000.0 + 125.0 * 60.0).unwrap();
        assert_eq!(reason.describe(), "inactive for 2h 5m");
        assert_eq!(
            should_reset(&policy(ResetMode::None), 0.0, 10.0 * DAY),
            None
        );
    }

    #[test]
    fn daily_resets_across_the_hour_boundary() {
        let p = policy(ResetMode::Daily);
        let at_5 = MIDNIGHT + 5.0 * 3600.0;
        assert_eq!(
            should_reset(&p, MIDNIGHT + 3.0 * 3600.0, at_5),
            Some(ResetReason::Daily { at_hour: 4 })
        );
        assert_eq!(should_reset(&p, MIDNIGHT + 4.5 * 3600.0, at_5), None);
        // Before 04:00 the boundary is yesterday's.
        let at_3 = MIDNIGHT + 3.0 * 3600.0;
        assert_eq!(should_reset(&p, MIDNIGHT - 3600.0, at_3), None);
        assert!(should_reset(&p, MIDNIGHT - DAY, at_3).is_some());
    }

    #[test]
    fn both_checks_either() {
        let p = policy(ResetMode::Both);
        assert!(should_reset(&p, MIDNIGHT + 4.1 * 3600.0, MIDNIGHT + 6.0 * 3600.0).is_some());
    }

    #[test]
    fn overrides_win_in_order() {
        let mut config = Config::default();
        config
            .reset_by_type
            .insert("group".into(), policy(ResetMode::Idle));
        config
            .reset_by_platform
            .insert("slack".into(), policy(ResetMode::Daily));
        assert_eq!(policy_for(&config, "slack", "group").mode, ResetMode::Daily);
        assert_eq!(
            policy_for(&config, "telegram", "group").mode,
            ResetMode::Idle
        );
        assert_eq!(policy_for(&config, "telegram", "dm").mode, ResetMode::None);
    }

    #[test]
    fn notice_names_the_reason_and_the_way_back() {
        let text = reset_notice(&ResetReason::Daily { at_hour: 4 });
        assert!(
            text.starts_with("◐ New session started (daily schedule at 4:00);"),
            "{text}"
        );
        assert!(
            text.contains("/resume") && text.contains("session_reset"),
            "{text}"
        );
    }
}
