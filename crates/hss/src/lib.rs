//! Embedded HSS: persistent subscriber store and EPS-AKA vector generation
