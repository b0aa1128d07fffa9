pub mod size;
