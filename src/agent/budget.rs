//! The iteration budget: how many model calls one agent may make before it must stop and
//! summarise. Sub-agents get their own, smaller budget.

/// Counts model calls against a cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IterationBudget {
    used: u32,
    max: u32,
}

impl IterationBudget {
    pub fn new(max: u32) -> Self {
        Self {
            used: 0,
            max: max.max(1),
        }
    }

    /// Takes one iteration; `false` when the budget is spent.
    pub fn take(&mut self) -> bool {
        if self.used >= self.max {
            return false;
        }
        self.used += 1;
        true
    }

    pub fn used(&self) -> u32 {
        self.used
    }

    pub fn max(&self) -> u32 {
        self.max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stops_at_the_cap() {
        let mut b = IterationBudget::new(2);
        assert!(b.take() && b.take());
        assert!(!b.take());
        assert_eq!(b.used(), 2);
        assert_eq!(IterationBudget::new(0).max(), 1);
    }
}
