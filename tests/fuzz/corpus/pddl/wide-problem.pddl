(define (problem wide-24) (:domain wide)
  (:objects o0 o1 o2 o3 o4 o5 o6 o7 o8 o9 o10 o11 o12 o13 o14 o15 o16 o17 o18 o19 o20 o21 o22 o23)
  (:init (p o0) (p o1) (p o2) (p o3) (p o4) (p o5) (p o6) (p o7) (p o8) (p o9) (p o10) (p o11) (p o12) (p o13) (p o14) (p o15) (p o16) (p o17) (p o18) (p o19) (p o20) (p o21) (p o22) (p o23))
  (:goal (q o0 o1 o2 o3 o4 o5)))
