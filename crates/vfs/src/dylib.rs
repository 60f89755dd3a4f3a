//! Shared objects opened at run time (`dlopen`, through `libloading`), as
//! librados and libcephfs are: the binary links nothing of them, and a
//! machine without one gets the error type of the module that wanted it,
//! which names the package to install.

use std::collections::HashMap;
use std::sync::OnceLock;

use parking_lot::Mutex;

/// `struct $lib`: every function of a C library that eagernfs calls, looked
/// up by `$lib::open(name)` when it loads the library. `$err` is the
/// module's error enum: `Missing(String)` when the library does not load,
/// `Symbol(&'static str)` when it lacks a function.
macro_rules! dynamic_library {
    (
        $(#[$lib_doc:meta])*
        struct $lib:ident, error $err:ident;
        $( $(#[$doc:meta])* fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty; )*
    ) => {
        $(#[$lib_doc])*
        pub(crate) struct $lib {
            /// Kept open for as long as the pointers below are used (the
            /// whole process: the library is never unloaded).
            _lib: libloading::Library,
            $( $(#[$doc])* pub(crate) $name: unsafe extern "C" fn($($ty),*) -> $ret, )*
        }

        impl $lib {
            fn open(name: &str) -> Result<$lib, $err> {
                // SAFETY: loading the library runs its static constructors,
                // which only set up its own state.
                let lib = unsafe { libloading::Library::new(name) }
                    .map_err(|e| $err::Missing(e.to_string()))?;
                $(
                    // SAFETY: the type is the C declaration's; the symbol is
                    // copied out of the library, which stays loaded.
                    let $name = unsafe {
                        *lib.get::<unsafe extern "C" fn($($ty),*) -> $ret>(
                            concat!(stringify!($name), "\0").as_bytes(),
                        )
                        .map_err(|_| $err::Symbol(stringify!($name)))?
                    };
                )*
                Ok($lib { _lib: lib, $($name,)* })
            }
        }
    };
}
pub(crate) use dynamic_library;

/// Where [`load_once`] keeps what it loaded: per library name, the library
/// or why it did not load.
pub(crate) type Loaded<L, E> = OnceLock<Mutex<HashMap<String, Result<&'static L, E>>>>;

/// The library `name` (a file name searched on the library path, or a
/// path), opened with `open` on first use; the outcome, success or not, is
/// kept in `loaded` for the life of the process (a library is never
/// unloaded).
pub(crate) fn load_once<L: Sync, E: Clone>(
    loaded: &'static Loaded<L, E>,
    name: &str,
    open: fn(&str) -> Result<L, E>,
) -> Result<&'static L, E> {
    let mut libs = loaded.get_or_init(Default::default).lock();
    libs.entry(name.to_string()).or_insert_with(|| open(name).map(|l| &*Box::leak(Box::new(l)))).clone()
}
