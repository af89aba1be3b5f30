//! NAS EPS (TS 24.301) codec interface and NAS security framing
