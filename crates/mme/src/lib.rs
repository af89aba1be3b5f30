//! MME signaling procedures as sans-IO state machines
