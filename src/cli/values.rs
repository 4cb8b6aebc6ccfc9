//! Option values that name one of the library's enums. The library knows nothing of
//! clap: each such enum has a mirror here that derives `clap::ValueEnum` (its names and
//! help texts are what `--help` lists) and a value parser that maps a parsed mirror onto
//! the library's enum.

use lrbc::layout::LayoutChoice;
use lrbc_live::traffic::RingSelection;
use lrbc_sim::client::Policy;
use lrbc_sim::engine::{Mode, Preset};

/// A mirror of a library enum, conversions both ways (the conversion from the library's
/// enum matches every variant, so a variant added there fails to compile until it is
/// added here), and a value parser producing the library's enum.
macro_rules! mirror {
    (
        $(#[$meta:meta])*
        $parser:ident: $mirror:ident => $lib:ident {
            $($(#[$vmeta:meta])* $variant:ident,)*
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
        pub enum $mirror {
            $($(#[$vmeta])* $variant,)*
        }

        impl From<$mirror> for $lib {
            fn from(value: $mirror) -> Self {
                match value {
                    $($mirror::$variant => Self::$variant,)*
                }
            }
        }

        impl From<$lib> for $mirror {
            fn from(value: $lib) -> Self {
                match value {
                    $($lib::$variant => Self::$variant,)*
                }
            }
        }

        #[doc = concat!("Parses a [`", stringify!($lib), "`] by the names of [`", stringify!($mirror), "`].")]
        pub fn $parser() -> impl clap::builder::TypedValueParser<Value = $lib> {
            use clap::builder::TypedValueParser as _;
            clap::builder::EnumValueParser::<$mirror>::new().map($lib::from)
        }
    };
}

mirror! {
    /// `--layout`.
    layout_choice: LayoutArg => LayoutChoice {
        /// Detect as spec section 8 says.
        Auto,
        /// LRBC v1 (with the extension block when its total_size matches).
        #[value(name = "lrbc-v1")]
        LrbcV1,
        /// The luckyrobots IPC layout.
        #[value(name = "luckyrobots-ipc")]
        LuckyrobotsIpc,
    }
}

mirror! {
    /// `traffic --ring`.
    ring_selection: RingArg => RingSelection {
        /// cmd_c2s and cmd_s2c.
        Cmd,
        /// ctl_c2s and ctl_s2c.
        Ctl,
        /// Every ring present.
        All,
    }
}

mirror! {
    /// `--preset` of the simulated engine and the benchmarks.
    preset: PresetArg => Preset {
        /// 4096 envs, obs 100, act 12, no images.
        #[value(name = "train4096")]
        Train4096,
        /// 64 envs, obs 32, act 8, 64×64 RGB.
        #[value(name = "cams64")]
        Cams64,
        /// 16 envs, obs 32, act 8, 256×256 RGB.
        #[value(name = "cams16")]
        Cams16,
    }
}

mirror! {
    /// `sim engine --mode`.
    mode: ModeArg => Mode {
        Training,
        Inference,
    }
}

mirror! {
    /// `sim client --policy`.
    policy: PolicyArg => Policy {
        /// Uniform in [-1, 1].
        Random,
        /// All zeros.
        Zero,
        /// A sine per env, phase-shifted by the env index.
        Sine,
        /// A noisy balancing controller reading each env's observations (cart-pole
        /// channels 0..4): episodes last long, as in a policy that has learned something.
        Balance,
    }
}

#[cfg(test)]
mod tests {
    use clap::ValueEnum as _;

    use super::*;

    #[test]
    fn every_mirrored_value_converts_to_the_library_value_of_the_same_name_and_back() {
        for &v in LayoutArg::value_variants() {
            assert_eq!(LayoutArg::from(LayoutChoice::from(v)), v);
        }
        for &v in RingArg::value_variants() {
            assert_eq!(RingArg::from(RingSelection::from(v)), v);
        }
        for &v in PresetArg::value_variants() {
            let name = v.to_possible_value().map(|p| p.get_name().to_string());
            assert_eq!(name.as_deref(), Some(Preset::from(v).as_str()));
            assert_eq!(PresetArg::from(Preset::from(v)), v);
        }
        for &v in ModeArg::value_variants() {
            assert_eq!(ModeArg::from(Mode::from(v)), v);
        }
        for &v in PolicyArg::value_variants() {
            assert_eq!(PolicyArg::from(Policy::from(v)), v);
        }
    }
}
