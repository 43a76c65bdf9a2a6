; Nesting near the parser's depth bound (64): conjunctions 30 deep in a precondition.
(define (domain deep)
  (:requirements :strips :negative-preconditions)
  (:predicates (p ?x) (r ?x))
  (:action a :parameters (?x) :precondition (and (and (and (and (and (and (and (and (and (and (and (and (and (and (and (and (and (and (and (and (and (and (and (and (and (and (and (and (and (and (p ?x))))))))))))))))))))))))))))))) :effect (and (r ?x) (not (p ?x)))))
