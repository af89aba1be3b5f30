pub struct Todo;
