//! Who may do what in a chat, person by person (SECURITY.md's threat model): a guest —
//! admitted only because their group is allowed — may chat, but the commands that change
//! the daemon for everyone need an allowed user, `/stop`, `/steer` and `/new` act only on
//! the guest's own turn (nor does a guest's plain message steer or interrupt another's), and an approval or clarify question is answered only by the person
//! whose turn asked or by an allowed user acting as admin.

use hermes_adapter::SessionSource;
use tokio::sync::oneshot;

use crate::tools::approval::ApprovalDecision;
use crate::tools::context::Authority;

/// A question a running turn waits on, with the person whose turn asked it.
#[derive(Debug)]
pub struct Pending<T> {
    pub answer: oneshot::Sender<T>,
    /// The user id of the turn's requester (`None`: the platform gave none).
    pub asker: Option<String>,
}

impl<T> Pending<T> {
    pub fn new(answer: oneshot::Sender<T>, asker: Option<String>) -> Self {
        Self { answer, asker }
    }
}

/// What a guest may do with a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Gate {
    /// Anyone admitted may run it.
    Open,
    /// A guest may run it only on a turn they started themself.
    OwnTurn,
    /// Only an allowed user may run it; the text says what it would do.
    AllowedUsersOnly(&'static str),
}

/// The refusal a guest gets for a command only allowed users may run.
pub(super) fn allowed_users_only_text(name: &str, why: &str, platform: &str) -> String {
    format!(
        "🔒 `/{name}` is refused: only allowed users of this bot may use it ({why}). You are \
         chatting here as a guest of this group. The bot's owner can make you an allowed user \
         by adding your user id to {}_ALLOWED_USERS (or by approving a pairing).",
        platform.to_uppercase()
    )
}

/// The refusal a guest gets for `/stop`, `/steer` or `/new` on someone else's turn.
pub(super) fn not_your_turn_text(name: &str) -> String {
    format!(
        "🔒 `/{name}` is refused: the running turn was started by someone else, and a guest \
         may only stop, steer or restart their own. The person who started it, or an allowed user of \
         this bot, can."
    )
}

/// Why the answerer may not answer a pending question, if they may not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum AnswerRefusal {
    /// Neither the asker nor an allowed user.
    NotTheAsker,
    /// A guest (asker or not) chose a permanent approval.
    PermanentByGuest,
}

/// Whether `answerer` (trusted as far as `authority`) may answer a question `asker`'s turn
/// asked, with `decision` when it is an approval.
pub(super) fn check_answer(
    asker: Option<&str>,
    answerer: &SessionSource,
    authority: Authority,
    decision: Option<ApprovalDecision>,
) -> Result<(), AnswerRefusal> {
    if authority.is_trusted() {
        return Ok(());
    }
    if decision == Some(ApprovalDecision::Always) {
        return Err(AnswerRefusal::PermanentByGuest);
    }
    let own = asker
        .filter(|id| !id.is_empty())
        .is_some_and(|id| answerer.user_id.as_deref() == Some(id));
    if !own {
        return Err(AnswerRefusal::NotTheAsker);
    }
    Ok(())
}

impl AnswerRefusal {
    /// The text the refused answerer gets; the question stays pending.
    pub(super) fn text(self, what: &str) -> String {
        match self {
            AnswerRefusal::NotTheAsker => format!(
                "🔒 Your answer is refused: only the person whose request asked for this {what}, \
                 or an allowed user of this bot, may answer it. It is still waiting for them."
            ),
            AnswerRefusal::PermanentByGuest => "🔒 `/approve always` is refused: only allowed \
                 users of this bot may approve a command permanently (it is written to \
                 command_allowlist). You may approve it once with /approve, or for this session \
                 with /approve session; the approval is still waiting."
                .to_owned(),
        }
    }
}

/// Logs a refusal for the operator (ids only, never message text).
pub(super) fn log_refusal(source: &SessionSource, what: &str, reason: &str) {
    tracing::warn!(
        platform = %source.platform,
        chat_id = %source.chat_id,
        user_id = source.user_id.as_deref().unwrap_or(""),
        what,
        reason,
        "refused: the sender lacks the authority"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_asker_or_an_allowed_user_answers_and_guests_never_permanently() {
        let member = |id: &str| SessionSource::dm("telegram", "-1001", id);
        let once = Some(ApprovalDecision::Once);
        let always = Some(ApprovalDecision::Always);
        assert_eq!(
            check_answer(Some("111"), &member("333"), Authority::Guest, once),
            Err(AnswerRefusal::NotTheAsker)
        );
        assert_eq!(
            check_answer(None, &member("333"), Authority::Guest, once),
            Err(AnswerRefusal::NotTheAsker)
        );
        assert_eq!(
            check_answer(Some("333"), &member("333"), Authority::Guest, once),
            Ok(())
        );
        for asker in [Some("333"), Some("111")] {
            assert_eq!(
                check_answer(asker, &member("333"), Authority::Guest, always),
                Err(AnswerRefusal::PermanentByGuest)
            );
        }
        assert_eq!(
            check_answer(Some("333"), &member("111"), Authority::AllowedUser, always),
            Ok(())
        );
        assert_eq!(
            check_answer(Some("333"), &member("444"), Authority::Guest, None),
            Err(AnswerRefusal::NotTheAsker)
        );
    }
}
