//! EPS security: Milenage, TS 33.401 key derivation, EIA/EEA (SNOW 3G, AES, ZUC)
