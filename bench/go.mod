module github.com/snowtoken/snowtoken/bench

go 1.26.8

require (
	github.com/bwmarrin/snowflake v0.3.0
	github.com/redis/go-redis/v9 v9.23.0
	github.com/snowtoken/snowtoken v0.0.0
	github.com/snowtoken/snowtoken/client v0.0.0
	github.com/sony/sonyflake v1.2.0
	golang.org/x/image v0.47.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/go-json-experiment/json v1.27.2 // indirect
	github.com/golang-jwt/jwt/v5 v5.3.1 // indirect
	github.com/maypok86/otter/v2 v2.4.0 // indirect
	go.opentelemetry.io/otel v1.47.0 // indirect
	go.opentelemetry.io/otel/trace v1.47.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
)

replace github.com/snowtoken/snowtoken => ../

replace github.com/snowtoken/snowtoken/client => ../client
