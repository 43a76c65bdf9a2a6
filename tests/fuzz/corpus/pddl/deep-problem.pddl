(define (problem deep-1) (:domain deep)
  (:objects a)
  (:init (p a))
  (:goal (and (and (and (and (and (and (and (and (and (and (and (and (and (and (and (and (and (and (and (and (and (and (and (and (and (r a))))))))))))))))))))))))))))
