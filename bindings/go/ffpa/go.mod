module github.com/libffpa/libffpa/bindings/go/ffpa

go 1.19
