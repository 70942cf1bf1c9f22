//! Congestion-control names: each stack lists the algorithms its library offers (`Choice`: the lab's name, the
//! aliases it also accepts, and the stack's own value); the lab passes one as CC (client) or --cc= (server).

/// One algorithm a stack offers: the lab's name (the registry's `quic_cc.options`), other accepted names, value.
pub struct Choice<T> {
    pub name: &'static str,
    pub aliases: &'static [&'static str],
    pub value: T,
}

/// Pick an algorithm by name (case and surrounding space ignored); "", "native" and "default" pick `choices[0]`
/// (the library's default). Err: one line naming the bad value and the allowed ones.
pub fn choose<'a, T>(name: &str, choices: &'a [Choice<T>]) -> Result<&'a Choice<T>, String> {
    let name = name.trim().to_ascii_lowercase();
    if matches!(name.as_str(), "" | "native" | "default") {
        return choices.first().ok_or_else(|| "no congestion control offered".to_string());
    }
    choices.iter().find(|c| c.name == name || c.aliases.contains(&name.as_str())).ok_or_else(|| {
        let allowed: Vec<&str> = choices.iter().map(|c| c.name).collect();
        format!("congestion control must be one of {}, got {name:?}", allowed.join(", "))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const CHOICES: &[Choice<u8>] = &[
        Choice { name: "cubic", aliases: &[], value: 1 },
        Choice { name: "newreno", aliases: &["reno"], value: 2 },
    ];

    #[test]
    fn names_aliases_and_the_default() {
        assert_eq!(choose("", CHOICES).unwrap().value, 1);
        assert_eq!(choose(" Native ", CHOICES).unwrap().value, 1);
        assert_eq!(choose("RENO", CHOICES).unwrap().name, "newreno");
        assert_eq!(choose("bbr", CHOICES).err().unwrap(),
                   "congestion control must be one of cubic, newreno, got \"bbr\"");
    }

    proptest! {
        #[test]
        fn a_choice_is_offered_or_an_error(name in "[a-zA-Z0-9 ]{0,10}") {
            match choose(&name, CHOICES) {
                Ok(c) => prop_assert!(CHOICES.iter().any(|x| x.name == c.name)),
                Err(e) => prop_assert!(e.starts_with("congestion control must be one of")),
            }
        }
    }
}
