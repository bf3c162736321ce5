package main

// configuration: the signing keys' phases and the time to the next step,
// reloads and refusals (a refused reload shows until it is fixed), the set
// each replica serves, secrets about to expire, and the
// failed-authentication limit.
func configuration() *board {
	b := newBoard("snowtoken-configuration", "snowtoken / Configuration",
		"Signing keys and their rotation, reloads of the clients file and keys (a refused one stays red until fixed), the set each replica serves, client secrets, and the failed-authentication limit.")

	b.row("Signing keys")
	b.stat("Keys by state", "Signing keys in force: next (published, not signing yet), active (signs), retired (verifies its tokens until they expire).", "none", 8, nil, nil,
		query{`max by (state) (snowtoken_signing_keys{` + sel + `})`, "{{state}}"})
	b.stat("Active key signing for", "Since the active key began to sign (keys.json's activated; none for a plain list of key files). The ticket SnowtokenSigningKeyRotationDue fires past 83 days without a next key.", "dtdurations", 8,
		steps("green", 83*86400.0, "orange", 90*86400.0, "red"), nil,
		query{`time() - max(snowtoken_signing_key_activated_timestamp_seconds{` + sel + `})`, ""})
	b.stat("Next key may sign in", "Until the next key may sign (published + 10 min): then run `snowtoken keys rotate` again. Empty without a next key.", "dtdurations", 8, nil, nil,
		query{`max(snowtoken_signing_key_next_signs_from_timestamp_seconds{` + sel + `}) - time()`, ""})

	b.row("Reloads")
	b.stat("Refused now", "1 (red) while a replica's last reload of the source was refused: the file on disk is not the set in force there, until it is fixed (docs/alerts.md#snowtokenreloadrefused).", "none", 12,
		steps("green", 1.0, "red"), valueText("0", "loaded", "green", "1", "REFUSED", "red"),
		query{`max by (instance, source) (snowtoken_reload_refused{` + sel + `})`, "{{instance}} {{source}}"})
	b.graph("Reloads by result and source", "Reloads that changed the set (ok), sets refused (refused), and refusals by source (clients, keys).", "short", 12,
		query{`sum by (result) (increase(snowtoken_config_reloads_total{` + sel + `}[$__rate_interval]))`, "{{result}}"},
		query{`sum by (source) (increase(snowtoken_reload_failures_total{` + sel + `}[$__rate_interval]))`, "refused: {{source}}"})
	b.table("Set in force per replica", "The clients file and keys each replica serves, by the first 12 hex digits of their SHA-256 (as /readyz): every replica should show the same.", "none", 12,
		query{`snowtoken_config_info{` + sel + `}`, ""})
	b.table("Client secrets: days left", "Days until each client's current secret expires (secret_expires), the soonest first; clients without an expiry are not listed.", "none", 12,
		query{`sort(min by (client_id) ((snowtoken_client_secret_expiry_timestamp_seconds{` + sel + `} - time()) / 86400))`, "{{client_id}}"})

	b.row("Failed-authentication limit")
	b.graph("429s by key", "Requests the failed-authentication limit refused, by the key limited (client, address). The ticket SnowtokenAuthFailuresAttack fires above 1/s for 10 minutes.", "reqps", 12,
		query{`sum by (limited_by) (rate(snowtoken_auth_rate_limited_total{` + sel + `}[$__rate_interval]))`, "{{limited_by}}"})
	b.graph("Failed authentications", "Client authentications that failed: unknown client, wrong secret or assertion, disabled client.", "reqps", 12,
		query{`sum by (instance) (rate(snowtoken_auth_failures_total{` + sel + `}[$__rate_interval]))`, "{{instance}}"})
	return b
}
