//! Which controller of the quorum a client asks: one policy for the simulated clients and
//! the node's, so the simulator tests the routing that ships.
//!
//! A client starts with controller 1 and keeps the one that answered. A `NotController`
//! answer that names the active controller moves it there at once. One that names nobody
//! (the quorum is electing) or no answer at all (a controller down or cut off) moves it to
//! the next controller in turn, after the client's retry backoff: asking every voter as fast
//! as it refuses would flood an electing quorum.

use crate::controller::ControllerResponse;
use crate::NodeId;

/// What to do after a controller's answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// A real answer (success or an error other than `NotController`): use it.
    Answered,
    /// The answer named the active controller: ask it at once ([`ControllerRouter::target`]).
    AskNow,
    /// Nobody is known to be active: ask the next controller after the retry backoff.
    AskLater,
}

/// A client's choice of controller among `1..=controllers`.
#[derive(Clone, Debug)]
pub struct ControllerRouter {
    controllers: u32,
    current: NodeId,
}

impl ControllerRouter {
    pub fn new(controllers: u32) -> Self {
        Self {
            controllers: controllers.max(1),
            current: 1,
        }
    }

    /// The controller to ask now.
    pub fn target(&self) -> NodeId {
        self.current
    }

    /// Controller `answered` replied `resp`.
    pub fn on_answer(&mut self, answered: NodeId, resp: &ControllerResponse) -> Route {
        match resp.not_controller() {
            None => {
                self.current = answered;
                Route::Answered
            }
            Some(Some(leader)) if leader != answered && self.is_voter(leader) => {
                self.current = leader;
                Route::AskNow
            }
            Some(_) => {
                self.after(answered);
                Route::AskLater
            }
        }
    }

    /// Controller `asked` gave no answer in time (down, cut off, or the connection failed):
    /// the next one in turn.
    pub fn on_no_answer(&mut self, asked: NodeId) {
        self.after(asked);
    }

    /// Ask the next controller in turn (e.g. a read that one controller's lagging image
    /// could not answer).
    pub fn move_on(&mut self) {
        self.after(self.current);
    }

    fn after(&mut self, id: NodeId) {
        if self.current == id {
            self.current = id % self.controllers + 1;
        }
    }

    fn is_voter(&self, id: NodeId) -> bool {
        (1..=self.controllers).contains(&id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::ControllerError;

    fn refused(leader: Option<NodeId>) -> ControllerResponse {
        ControllerResponse::InitProducerId(Err(ControllerError::NotController { leader }))
    }

    #[test]
    fn a_hint_is_followed_at_once_and_kept() {
        let mut r = ControllerRouter::new(3);
        assert_eq!(r.target(), 1);
        assert_eq!(r.on_answer(1, &refused(Some(3))), Route::AskNow);
        assert_eq!(r.target(), 3);
        let ok = ControllerResponse::InitProducerId(Ok(crate::controller::ProducerIdAndEpoch {
            producer_id: 7,
            producer_epoch: 0,
        }));
        assert_eq!(r.on_answer(3, &ok), Route::Answered);
        assert_eq!(r.target(), 3);
    }

    #[test]
    fn no_hint_or_no_answer_moves_to_the_next_in_turn_after_a_backoff() {
        let mut r = ControllerRouter::new(3);
        assert_eq!(r.on_answer(1, &refused(None)), Route::AskLater);
        assert_eq!(r.target(), 2);
        r.on_no_answer(2);
        assert_eq!(r.target(), 3);
        r.on_no_answer(3);
        assert_eq!(r.target(), 1);
        // A hint naming the refusing controller itself, or no voter, is no hint.
        assert_eq!(r.on_answer(1, &refused(Some(1))), Route::AskLater);
        assert_eq!(r.on_answer(2, &refused(Some(9))), Route::AskLater);
        assert_eq!(r.target(), 3);
    }

    #[test]
    fn a_late_answer_from_another_controller_does_not_skip_the_current_one() {
        let mut r = ControllerRouter::new(3);
        r.on_no_answer(1);
        assert_eq!(r.target(), 2);
        // Controller 1's refusal arrives after the client moved on: 2 stays the target.
        assert_eq!(r.on_answer(1, &refused(None)), Route::AskLater);
        assert_eq!(r.target(), 2);
    }

    #[test]
    fn a_single_controller_is_always_the_target() {
        let mut r = ControllerRouter::new(1);
        r.on_no_answer(1);
        assert_eq!(r.on_answer(1, &refused(None)), Route::AskLater);
        assert_eq!(r.target(), 1);
    }
}
