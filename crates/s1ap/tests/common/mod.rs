pub mod captures;
