module snowtoken

go 1.26.8
