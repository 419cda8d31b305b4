//! Incidents: an internal failure (a state.db error, a panicking turn) that a chat user hears
//! about. The user gets one short sentence with an id; the details go to the log under the
//! same id, so an operator can find them and nothing internal (paths, SQL, error chains)
//! reaches a chat.

/// One incident's id, random so ids from different runs do not collide in one log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Incident(String);

impl Incident {
    pub fn new() -> Self {
        Self(format!("{:08x}", rand::random::<u32>()))
    }

    pub fn id(&self) -> &str {
        &self.0
    }

    /// What the user reads instead of the error.
    pub fn user_text(&self) -> String {
        format!(
            "⚠️ Something went wrong on my side and I couldn't finish that; please try again (incident {}).",
            self.0
        )
    }
}

impl Default for Incident {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_user_text_carries_the_id_and_nothing_else_variable() {
        let incident = Incident::new();
        assert_eq!(incident.id().len(), 8);
        let text = incident.user_text();
        assert!(
            text.contains(&format!("(incident {})", incident.id())),
            "{text}"
        );
        assert_eq!(
            text.replace(incident.id(), "ID"),
            Incident(String::from("ID")).user_text()
        );
    }
}
