module github.com/snowtoken/snowtoken/bitsalloc

go 1.26.8
