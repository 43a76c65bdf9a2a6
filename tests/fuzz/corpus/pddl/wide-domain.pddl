; Grounding blow-up: six free parameters over 24 objects, so grounding must stop at its
; bound (MAX_JOIN_STEPS) rather than enumerate 24^6 bindings.
(define (domain wide)
  (:requirements :strips)
  (:predicates (p ?a) (q ?a ?b ?c ?d ?e ?f))
  (:action join
    :parameters (?a ?b ?c ?d ?e ?f)
    :precondition (and (p ?a) (p ?b) (p ?c) (p ?d) (p ?e) (p ?f))
    :effect (q ?a ?b ?c ?d ?e ?f)))
