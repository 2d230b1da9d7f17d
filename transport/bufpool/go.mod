module github.com/smartt-transport/smartt/transport/bufpool

go 1.24.0
