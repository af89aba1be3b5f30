//! S1AP (TS 36.413) codec interface
