//! Forward-compatible string enums: known values get variants, unknown values are kept in
//! `Unknown(String)` instead of failing deserialisation of the whole response.

/// Declares a string enum with an `Unknown(String)` catch-all, plus `as_str`, `Display`,
/// `FromStr` (infallible), `Serialize` and `Deserialize`.
#[macro_export]
#[doc(hidden)]
macro_rules! string_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $value:literal, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )+
            /// A value this client does not know yet, kept verbatim.
            Unknown(String),
        }

        impl $name {
            /// The wire value.
            pub fn as_str(&self) -> &str {
                match self {
                    $( $name::$variant => $value, )+
                    $name::Unknown(s) => s.as_str(),
                }
            }

            /// Every known wire value, for messages that list what is accepted.
            pub const KNOWN: &'static [&'static str] = &[$($value),+];
        }

        impl ::std::str::FromStr for $name {
            type Err = ::std::convert::Infallible;
            fn from_str(s: &str) -> ::std::result::Result<Self, Self::Err> {
                Ok(match s {
                    $( $value => $name::$variant, )+
                    other => $name::Unknown(other.to_owned()),
                })
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, s: S) -> ::std::result::Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(d: D) -> ::std::result::Result<Self, D::Error> {
                let s = <::std::borrow::Cow<'de, str> as ::serde::Deserialize>::deserialize(d)?;
                Ok(match s.parse() {
                    Ok(v) => v,
                    Err(never) => match never {},
                })
            }
        }
    };
}
