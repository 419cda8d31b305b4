//! `hermesd pairing list | approve | revoke`: the owner's side of DM pairing, with the
//! Python `hermes pairing` texts (naming `hermesd`). A refused approval or an unknown user
//! exits 1 after its message; any other failure is one `error:` line on stderr, exit 1.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use clap::Subcommand;
use serde::Serialize;

use super::EXIT_FAILURE;
use crate::gateway::pairing::{
    ApproveError, ApprovedListing, PairingError, PairingStore, PendingRequest,
};
use crate::home::HermesHome;

#[derive(Debug, Subcommand)]
pub enum PairingCommand {
    /// Show pending pairing requests and approved users.
    List {
        /// Print JSON instead of tables.
        #[arg(long)]
        json: bool,
    },
    /// Approve a pairing code a user received.
    Approve { platform: String, code: String },
    /// Revoke an approved user's access.
    Revoke {
        platform: String,
        #[arg(value_name = "USER_ID")]
        user: String,
    },
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

pub fn run(home: &HermesHome, env: &BTreeMap<String, String>, command: PairingCommand) -> i32 {
    // With `state.backend: postgres` the pairing files live in the shared database.
    let opened = match crate::config::load(home, env) {
        Ok(loaded) if loaded.config.state.backend == crate::config::StateBackend::Postgres => {
            crate::gateway::shared_state::pairing_store(home, &loaded.config)
        }
        _ => PairingStore::open(home),
    };
    let store = match opened {
        Ok(store) => store.with_env(env.clone()),
        Err(e) => {
            eprintln!("error: cannot open the pairing store: {e}");
            return EXIT_FAILURE;
        }
    };
    let result = match command {
        PairingCommand::List { json } => list(&store, json),
        PairingCommand::Approve { platform, code } => approve(&store, home, env, &platform, &code),
        PairingCommand::Revoke { platform, user } => revoke(&store, &platform, &user),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            EXIT_FAILURE
        }
    }
}

#[derive(Serialize)]
struct Listing {
    pending: Vec<PendingRequest>,
    approved: Vec<ApprovedListing>,
}

fn list(store: &PairingStore, json: bool) -> Result<i32, PairingError> {
    let pending = store.list_pending(None, now())?;
    let approved = store.list_approved(None)?;
    if json {
        let text = serde_json::to_string_pretty(&Listing { pending, approved }).map_err(|e| {
            PairingError::Io {
                context: "cannot encode JSON".to_owned(),
                source: std::io::Error::other(e),
            }
        })?;
        println!("{text}");
        return Ok(0);
    }
    print!("{}", render_list(&pending, &approved));
    Ok(0)
}

/// The reference's `_cmd_list` table layout (columns and widths), with our own sentences.
fn render_list(pending: &[PendingRequest], approved: &[ApprovedListing]) -> String {
    if pending.is_empty() && approved.is_empty() {
        return "Nobody has asked to pair yet: no pending requests, no approved users.\n"
            .to_owned();
    }
    let mut out = String::new();
    if pending.is_empty() {
        out.push_str("\n  No pending pairing requests.\n");
    } else {
        out.push_str(&format!(
            "\n  Pending Pairing Requests ({}):\n",
            pending.len()
        ));
        out.push_str(&format!(
            "  {:<12} {:<10} {:<20} {:<20} {}\n",
            "Platform", "Code", "User ID", "Name", "Age"
        ));
        out.push_str(&format!(
            "  {:<12} {:<10} {:<20} {:<20} {}\n",
            "--------", "----", "-------", "----", "---"
        ));
        for p in pending {
            out.push_str(&format!(
                "  {:<12} {:<10} {:<20} {:<20} {}m ago\n",
                p.platform, p.code, p.user_id, p.user_name, p.age_minutes
            ));
        }
    }
    if approved.is_empty() {
        out.push_str("\n  No approved users.\n");
    } else {
        out.push_str(&format!("\n  Approved Users ({}):\n", approved.len()));
        out.push_str(&format!(
            "  {:<12} {:<20} {:<20}\n",
            "Platform", "User ID", "Name"
        ));
        out.push_str(&format!(
            "  {:<12} {:<20} {:<20}\n",
            "--------", "-------", "----"
        ));
        for a in approved {
            out.push_str(&format!(
                "  {:<12} {:<20} {:<20}\n",
                a.platform, a.user_id, a.user_name
            ));
        }
    }
    out.push('\n');
    out
}

fn approve(
    store: &PairingStore,
    home: &HermesHome,
    env: &BTreeMap<String, String>,
    platform: &str,
    code: &str,
) -> Result<i32, PairingError> {
    let platform = platform.trim().to_lowercase();
    let code = code.trim().to_uppercase();
    match store.approve(&platform, &code, now()) {
        Ok(user) => {
            let display = if user.user_name.is_empty() {
                user.user_id.clone()
            } else {
                format!("{} ({})", user.user_name, user.user_id)
            };
            println!("\n  Approved: {display} may now use the bot on {platform}.");
            println!("  Their next message is answered; they need do nothing else.\n");
            Ok(0)
        }
        Err(ApproveError::LockedOut { until, .. }) => {
            let minutes = ((until - now()).max(0.0) as u64) / 60;
            let limits = store.paths().rate_limits();
            let shown = match limits.strip_prefix(home.path()) {
                Ok(rest) => format!("{}/{}", home.display(env), rest.display()),
                Err(_) => limits.display().to_string(),
            };
            println!("\n  Approvals on '{platform}' are blocked: too many wrong codes were tried.");
            println!("  Lockout clears in ~{minutes} minute(s).");
            println!("  To lift it now, remove the '_lockout:{platform}' key from {shown}\n");
            Ok(EXIT_FAILURE)
        }
        Err(ApproveError::NotFound { .. }) => {
            println!(
                "\n  No pending code '{code}' on '{platform}': it was never issued or has expired."
            );
            println!("  'hermesd pairing list' shows the codes still waiting.\n");
            Ok(EXIT_FAILURE)
        }
        Err(ApproveError::Store(e)) => Err(e),
    }
}

fn revoke(store: &PairingStore, platform: &str, user_id: &str) -> Result<i32, PairingError> {
    let platform = platform.trim().to_lowercase();
    if store.revoke(&platform, user_id)? {
        println!("\n  Revoked access for user {user_id} on {platform}.\n");
        Ok(0)
    } else {
        println!("\n  Nothing to revoke: user {user_id} is not approved on {platform}.\n");
        Ok(EXIT_FAILURE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_layout_matches_the_reference() {
        let pending = vec![PendingRequest {
            platform: "telegram".into(),
            code: "0123abcd".into(),
            user_id: "42".into(),
            user_name: "bob".into(),
            age_minutes: 3,
        }];
        let approved = vec![ApprovedListing {
            platform: "discord".into(),
            user_id: "7".into(),
            user_name: String::new(),
            approved_at: Some(1.0),
        }];
        let expected = "\n  Pending Pairing Requests (1):\n\
            \x20 Platform     Code       User ID              Name                 Age\n\
            \x20 --------     ----       -------              ----                 ---\n\
            \x20 telegram     0123abcd   42                   bob                  3m ago\n\
            \n  Approved Users (1):\n\
            \x20 Platform     User ID              Name                \n\
            \x20 --------     -------              ----                \n\
            \x20 discord      7                                        \n\n";
        assert_eq!(render_list(&pending, &approved), expected);
        assert_eq!(
            render_list(&[], &[]),
            "Nobody has asked to pair yet: no pending requests, no approved users.\n"
        );
        let only_approved = render_list(&[], &approved);
        assert!(
            only_approved.starts_with("\n  No pending pairing requests.\n\n  Approved Users (1):")
        );
    }
}
