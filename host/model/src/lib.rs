//! The candle backbone: one pretrained model, three roles (Actor, Judge, Editor).
#![deny(missing_docs)]
