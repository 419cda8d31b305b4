//! Session titles in the gateway (Hermes `maybe_auto_title` + the Discord auto-thread
//! rename): after an early exchange's reply was handed to delivery, a background task asks
//! the model for a title, stores it only if the session is still untitled (a `/title`
//! typed meanwhile wins), and asks the platform to rename the thread the conversation
//! lives in — the adapter renames only threads it opened itself. Nothing here can delay or
//! change a reply; failures are logged, never shown to the user.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use hermes_adapter::{ChatType, SessionSource};

use crate::agent::title;
use crate::gateway::router::live::Live;
use crate::gateway::router::responder::Responder;
use crate::state::StoreError;

/// The first failed title generation is a warning; later ones are debug lines, so a
/// provider that cannot title does not add a warning to every new conversation.
static FAILURE_WARNED: AtomicBool = AtomicBool::new(false);

/// Starts titling `session_id` in the background when this was an early exchange of a
/// chat session and `auxiliary.title_generation.enabled` is on.
pub(in crate::gateway::router) fn spawn_auto_title(
    live: &Live,
    responder: &Arc<Responder>,
    source: &SessionSource,
    session_id: &str,
    user_message: &str,
    reply: &str,
    early_exchange: bool,
) {
    if !live.config.auxiliary.title_generation.enabled || !early_exchange {
        return;
    }
    let Ok(deps) = &live.agent else {
        return;
    };
    let (deps, responder) = (deps.clone(), responder.clone());
    let (source, session_id) = (source.clone(), session_id.to_owned());
    let (user_message, reply) = (user_message.to_owned(), reply.to_owned());
    tokio::spawn(async move {
        match deps.store.get_session(&session_id).await {
            Ok(Some(session)) if session.title.is_none() => {}
            _ => return,
        }
        let generated = match title::generate_title(&deps.client, &user_message, &reply).await {
            Ok(Some(generated)) => generated,
            Ok(None) => return,
            Err(error) => {
                if FAILURE_WARNED.swap(true, Ordering::Relaxed) {
                    tracing::debug!(session_id = %session_id, %error, "title generation failed");
                } else {
                    tracing::warn!(session_id = %session_id, %error, "title generation failed (later failures are logged at debug)");
                }
                return;
            }
        };
        let Some(stored) = store_generated(&deps.store, &session_id, &generated).await else {
            return;
        };
        tracing::info!(session_id = %session_id, title = %stored, "session titled");
        rename_session_thread(&responder, &source, &stored).await;
    });
}

/// Renames the thread `source` lives in after the session's title (the adapter decides
/// whether the thread is one it opened: a Discord auto-thread, a Slack assistant thread
/// in a DM).
pub(in crate::gateway::router) async fn rename_session_thread(
    responder: &Responder,
    source: &SessionSource,
    title: &str,
) {
    if source.chat_type != ChatType::Thread && source.chat_type != ChatType::Dm {
        return;
    }
    let (Some(thread_id), Some(link)) = (&source.thread_id, responder.link(&source.platform))
    else {
        return;
    };
    let name = title::thread_name(title);
    let result = link.adapter.rename_thread(thread_id, &name).await;
    if let Some((kind, error)) = &result.error {
        tracing::warn!(platform = %source.platform, ?kind, %error, "could not rename the thread after the session title");
    }
}

/// Stores `generated` if the session is still untitled; a title another session holds
/// gets the next free `#N` variant, as in Hermes. Returns what was stored.
async fn store_generated(
    store: &crate::state::Store,
    session_id: &str,
    generated: &str,
) -> Option<String> {
    let mut candidate = generated.to_owned();
    for _ in 0..2 {
        match store.set_auto_title_if_empty(session_id, &candidate).await {
            Ok(true) => return Some(candidate),
            Ok(false) => return None,
            Err(StoreError::TitleInUse { .. }) => {
                match store.next_title_in_lineage(&candidate).await {
                    Ok(next) if next != candidate => candidate = next,
                    _ => return None,
                }
            }
            Err(error) => {
                tracing::debug!(session_id, %error, "cannot store the generated title");
                return None;
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::store_generated;
    use crate::state::{NewSession, Store};

    #[tokio::test]
    async fn a_generated_title_never_overwrites_one_and_collisions_get_a_number() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("state.db")).unwrap();
        for id in ["s1", "s2", "s3"] {
            store
                .create_session(NewSession::new(id, "discord"))
                .await
                .unwrap();
        }
        assert_eq!(
            store_generated(&store, "s1", "Garden Party")
                .await
                .as_deref(),
            Some("Garden Party")
        );
        // Another session generating the same title gets the next free variant.
        assert_eq!(
            store_generated(&store, "s2", "Garden Party")
                .await
                .as_deref(),
            Some("Garden Party #2")
        );
        // A session titled meanwhile (a manual /title) keeps its title.
        store.set_session_title("s3", Some("Mine")).await.unwrap();
        assert_eq!(store_generated(&store, "s3", "Generated").await, None);
        let title = store.get_session("s3").await.unwrap().unwrap().title;
        assert_eq!(title.as_deref(), Some("Mine"));
        assert_eq!(store_generated(&store, "missing", "Anything").await, None);
    }
}
