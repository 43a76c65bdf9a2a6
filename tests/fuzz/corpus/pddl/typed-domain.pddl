; A type chain, constants of a subtype, equality and negative literals.
(define (domain typed)
  (:requirements :strips :typing :negative-preconditions :equality)
  (:types vehicle - object truck - vehicle van - truck place - object city - place)
  (:constants depot - city)
  (:predicates (at ?v - vehicle ?p - place) (road ?a ?b - place) (busy ?v - vehicle))
  (:action drive
    :parameters (?v - truck ?from ?to - place)
    :precondition (and (at ?v ?from) (road ?from ?to) (not (= ?from ?to)) (not (busy ?v)))
    :effect (and (at ?v ?to) (not (at ?v ?from)))))
