//! Which controller a client asks: with a Raft quorum only the active controller acts on a
//! request (the others refuse with `NotController`, naming the active one when they know
//! it), so a client keeps one small piece of state across its controller requests. The
//! simulated client and the real one both ask this router, so they choose alike.
//!
//! Policy, decided once: a refusal that names another controller sends the next request
//! there; a success keeps the controller that answered; no answer, or a refusal with no
//! usable hint, moves to the next controller in turn ([`controller_for`]).

use crate::controller::ControllerResponse;
use crate::message::Address;
use crate::types::NodeId;

/// Where a client's `attempt`-th controller request goes: the controllers (ids 1..=N) in
/// turn, so a retry after no answer (a controller down, or not the active one and saying
/// so) tries the next. With a single controller, always controller 1.
pub fn controller_for(attempt: u64, controllers: u32) -> Address {
    Address::Controller(1 + (attempt % u64::from(controllers.max(1))) as u32)
}

/// A client's choice of controller across its requests (sans I/O: the host sends, waits and
/// reports what came back).
///
/// The host calls [`choose`](Self::choose) for every request it sends, then one of
/// [`on_reply`](Self::on_reply) or [`move_on`](Self::move_on) if it learns how the
/// request went. A host that reports nothing (the simulated client, whose controller
/// requests carry no correlation and are resent on its own timer) asks the controllers in
/// turn.
#[derive(Clone, Debug)]
pub struct ControllerRouter {
    controllers: u32,
    /// Requests sent with no known controller to ask: the turn for the next such request.
    attempts: u64,
    /// The controller to ask next: the one that last answered, or the one a refusal named.
    known: Option<NodeId>,
}

impl ControllerRouter {
    /// A router over controllers `1..=controllers` (at least one).
    pub fn new(controllers: u32) -> Self {
        Self {
            controllers: controllers.max(1),
            attempts: 0,
            known: None,
        }
    }

    pub fn controllers(&self) -> u32 {
        self.controllers
    }

    /// The controller to send the next request to. Asking in turn counts as an attempt, so
    /// the request after it goes to the next controller unless a reply says otherwise.
    pub fn choose(&mut self) -> NodeId {
        if let Some(id) = self.known {
            return id;
        }
        let Address::Controller(id) = controller_for(self.attempts, self.controllers) else {
            unreachable!("controller_for names a controller")
        };
        self.attempts += 1;
        id
    }

    /// [`choose`](Self::choose) as an address.
    pub fn choose_address(&mut self) -> Address {
        Address::Controller(self.choose())
    }

    /// Controller `from` answered `resp`. Returns true when the request was acted on (the
    /// host is done); false for a `NotController` refusal (send it again, to
    /// [`choose`](Self::choose)).
    pub fn on_reply(&mut self, from: NodeId, resp: &ControllerResponse) -> bool {
        match resp.not_controller() {
            None => {
                self.known = Some(from);
                true
            }
            Some(hint) => {
                self.known = Some(from);
                self.move_on();
                // A hint naming the refuser itself or no controller we know is no help.
                self.known = hint.filter(|&h| h != from && (1..=self.controllers).contains(&h));
                false
            }
        }
    }

    /// The last request got no answer (lost connection, timeout), or an answer that did not
    /// help (a follower's lagging view): the next goes to the controller after it in turn.
    pub fn move_on(&mut self) {
        if let Some(last) = self.known.take() {
            // controller_for(k) is the controller after controller k (ids are 1-based).
            self.attempts = u64::from(last);
        }
    }

    /// True when the next request is a retry in turn with nothing learnt to go on (every
    /// controller may be mid-election: a host should back off before sending it).
    pub fn guessing(&self) -> bool {
        self.known.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::ControllerError;

    fn refused(leader: Option<NodeId>) -> ControllerResponse {
        ControllerResponse::InitProducerId(Err(ControllerError::NotController { leader }))
    }

    fn answered() -> ControllerResponse {
        ControllerResponse::InitProducerId(Ok(crate::controller::ProducerIdAndEpoch {
            producer_id: 7,
            producer_epoch: 0,
        }))
    }

    #[test]
    fn controller_for_cycles_through_the_controllers() {
        let ids: Vec<Address> = (0..4).map(|a| controller_for(a, 3)).collect();
        assert_eq!(
            ids,
            [1, 2, 3, 1].map(Address::Controller).to_vec(),
            "in turn, then around"
        );
        assert_eq!(controller_for(5, 0), Address::Controller(1));
    }

    #[test]
    fn a_host_that_reports_nothing_asks_in_turn() {
        let mut r = ControllerRouter::new(3);
        let ids: Vec<NodeId> = (0..5).map(|_| r.choose()).collect();
        assert_eq!(ids, vec![1, 2, 3, 1, 2]);
    }

    #[test]
    fn a_refusal_with_a_hint_goes_to_the_hinted_controller() {
        let mut r = ControllerRouter::new(3);
        assert_eq!(r.choose(), 1);
        assert!(!r.on_reply(1, &refused(Some(3))));
        assert!(!r.guessing());
        assert_eq!(r.choose(), 3);
        assert!(r.on_reply(3, &answered()));
        // A success keeps the controller that answered.
        assert_eq!(r.choose(), 3);
        assert_eq!(r.choose(), 3);
    }

    #[test]
    fn no_answer_or_a_useless_hint_moves_on_in_turn() {
        let mut r = ControllerRouter::new(3);
        assert_eq!(r.choose(), 1);
        assert!(r.on_reply(1, &answered()));
        assert_eq!(r.choose(), 1);
        r.move_on();
        assert!(r.guessing());
        assert_eq!(r.choose(), 2);
        // Naming itself, or a controller outside 1..=3, is no hint.
        assert!(!r.on_reply(2, &refused(Some(2))));
        assert_eq!(r.choose(), 3);
        assert!(!r.on_reply(3, &refused(Some(9))));
        assert_eq!(r.choose(), 1);
        assert!(!r.on_reply(1, &refused(None)));
        assert_eq!(r.choose(), 2);
    }

    #[test]
    fn moving_on_from_a_hinted_controller_takes_the_one_after_it() {
        let mut r = ControllerRouter::new(3);
        assert_eq!(r.choose(), 1);
        assert!(!r.on_reply(1, &refused(Some(3))));
        assert_eq!(r.choose(), 3);
        assert!(r.on_reply(3, &answered()));
        r.move_on();
        assert_eq!(r.choose(), 1, "the one after 3, not 2 again");
    }

    #[test]
    fn metadata_pages_are_never_refusals() {
        let mut r = ControllerRouter::new(3);
        let page = ControllerResponse::Metadata(crate::controller::MetadataDelta {
            from: 0,
            records: vec![],
            end_offset: 0,
        });
        assert_eq!(r.choose(), 1);
        assert!(r.on_reply(1, &page));
        assert_eq!(r.choose(), 1);
    }

    #[test]
    fn a_single_controller_is_always_asked() {
        let mut r = ControllerRouter::new(0);
        assert_eq!(r.controllers(), 1);
        r.move_on();
        assert_eq!((r.choose(), r.choose()), (1, 1));
    }
}
