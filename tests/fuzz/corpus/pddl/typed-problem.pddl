(define (problem typed-1) (:domain typed)
  (:objects v1 - van t1 - truck a b - city)
  (:init (at v1 depot) (at t1 a) (road depot a) (road a b) (road b depot))
  (:goal (and (at v1 b) (at t1 depot) (not (busy v1)))))
