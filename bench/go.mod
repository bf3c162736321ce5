module snowtoken/bench

go 1.26.8

require (
	github.com/bwmarrin/snowflake v0.3.0
	github.com/sony/sonyflake v1.2.0
	snowtoken v0.0.0
)

require golang.org/x/image v0.47.0 // indirect

replace snowtoken => ../
