//! PEPC slice: UE context (control/counter state), data path pipeline, control thread
