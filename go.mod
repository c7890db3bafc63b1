module github.com/netdoctor/netdoctor

go 1.26.8
